// Package backend is the contract between the decode loop (runtime/engine)
// and the backends that execute window graphs (runtime/backend/cpu, runtime/backend/mslemu,
// runtime/backend/metal, runtime/backend/cuda). The engine imports only this package; each
// backend implements it and imports neither the engine nor another backend.
//
// The life of a model on a backend: NewMemory once for all of its window
// graphs, the engine fills the weights through Memory, then Compile once per
// graph; each window the engine writes params, runs one Program, and reads
// the logits, always between runs. Optional capabilities are the small
// interfaces below, found by type assertion.
package backend

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
)

// Memory is a model's named buffers as the host sees them: byte slices over
// the memory the backend's programs read and write (one address for host
// and device: Go or mapped memory on the CPU, shared memory on Apple
// silicon, managed or pinned memory with CUDA). The backend owns the bytes;
// a slice stays valid until the backend is closed. The host touches them
// only between runs, or at a host point for the buffers the program is not
// running on (HostMemory is the implementation all backends
// share).
type Memory interface {
	// Bytes is the range r, capacity clipped to it; an error names a buffer
	// the graphs never declared or a range outside it.
	Bytes(r graph.Range) ([]byte, error)
	// Buffer is a whole buffer, nil for one no graph declares.
	Buffer(name string) []byte
	// Clear zeroes every buffer of a kind (graph.KindState: a new sequence).
	Clear(kind string)
	// Snapshot copies every buffer of a kind into dst (reused when large
	// enough) and returns it; Restore copies such a snapshot back.
	Snapshot(kind string, dst map[string][]byte) map[string][]byte
	Restore(snap map[string][]byte)
}

// Writer is a Memory that must see the host's writes to some buffers go
// through it: the cuda backend keeps the buffers the GPU writes and the host
// reads (the scratch, the carry) in device memory behind a host mirror, so a
// write into the mirror alone would not reach the device.
type Writer interface {
	Write(r graph.Range, data []byte) error
}

// Write copies data to the start of range r of mem, through mem's Write
// where it is a Writer.
func Write(mem Memory, r graph.Range, data []byte) error {
	if w, ok := mem.(Writer); ok {
		return w.Write(r, data)
	}
	b, err := mem.Bytes(r)
	if err != nil {
		return err
	}
	if len(data) > len(b) {
		return fmt.Errorf("writing %d bytes into range %s+%d of %d bytes", len(data), r.Buffer, r.Offset, len(b))
	}
	copy(b, data)
	return nil
}

// Program is one window graph bound to a Memory. Run executes every
// dispatch once, with the graph's barriers, and returns when the results
// are in memory. One program of a backend runs at a time.
type Program interface {
	Run() error
}

// HostProgram is a Program that can stop at the graph's host points and
// call the host there (after a layer's router, before its routed experts
// run): what expert streaming needs from a backend. The program waits while
// host runs; host may read the router's output and write the expert arena
// and the residency map, and an error from it ends the run with that error.
type HostProgram interface {
	Program
	RunHost(host func(graph.HostPoint) error) error
}

// SegmentedProgram is a HostProgram that can run its window in pieces cut
// at the host points: RunSegment(k, host) runs the dispatches after host
// point k-1's router (graph.HostPoint.After) through host point k's router
// and calls host at point k (segment len(HostPoints): the dispatches after
// the last router). Segments 0..len(HostPoints) run in order compute what
// one RunHost does. Between two segments the caller may run other windows'
// segments on the same memory, putting back first what this window's later
// dispatches read of the scratch, params and carry (layer-major prefill:
// each layer for every window of a prompt before the next layer).
type SegmentedProgram interface {
	HostProgram
	RunSegment(k int, host func(graph.HostPoint) error) error
}

// RoutedBatch is the routed experts of one MoE layer for the rows of
// several windows, taken out of their segments (RoutedBatcher): each
// window's rows one after another.
type RoutedBatch struct {
	Rows int       // all the windows' live rows
	TopK int       // choices a row
	X    []float32 // Rows × hidden: the rows the experts take
	IDs  []uint32  // Rows × TopK: the router's choices
	// Vals is Rows × TopK × hidden: down_e(silu(gate_e x) ⊙ up_e x) of
	// each row's choice e, unweighted; Done marks the choices computed.
	Vals []float32
	Done []bool
}

// Reset empties b for the next batch, keeping its memory.
func (b *RoutedBatch) Reset() {
	b.Rows, b.TopK = 0, 0
	b.X, b.IDs, b.Vals, b.Done = b.X[:0], b.IDs[:0], b.Vals[:0], b.Done[:0]
}

// RoutedBatcher is a SegmentedProgram whose segments' routed experts can
// run outside the window, for the rows of many windows at once: layer-major
// prefill reads each expert of a layer once for the whole prompt and
// multiplies it by all the prompt's rows routed to it, through an arena
// smaller than the layer, a group of experts at a time. The windows'
// programs share the expert arena and its smap.
type RoutedBatcher interface {
	SegmentedProgram
	// Routed says whether segment k runs routed experts the batch can take.
	Routed(k int) bool
	// ReadRouted appends segment k's routed-expert inputs (the rows and
	// the router's choices, as the window's earlier segments left them in
	// memory) to b and returns the window's first row in b.
	ReadRouted(k int, b *RoutedBatch) (row0 int, err error)
	// RunRouted computes the choices of b whose expert is in only (by
	// expert; the host has made them resident), with the expert weights of
	// this program's segment k.
	RunRouted(k int, b *RoutedBatch, only []bool) error
	// RunSegmentRouted is RunSegment with segment k's routed experts taken
	// from b's rows from row0 on: their dispatches do not run, the values
	// are weighed and written where the down dispatch writes them.
	RunSegmentRouted(k int, b *RoutedBatch, row0 int, host func(graph.HostPoint) error) error
}

// SegmentBounds is segment k's dispatch range [lo, hi) in a window of n
// dispatches with host points hps (see SegmentedProgram).
func SegmentBounds(hps []graph.HostPoint, k, n int) (lo, hi int, err error) {
	if k < 0 || k > len(hps) {
		return 0, 0, fmt.Errorf("segment %d of a window with %d host points", k, len(hps))
	}
	lo, hi = 0, n
	if k > 0 {
		lo = hps[k-1].After + 1
	}
	if k < len(hps) {
		hi = hps[k].After + 1
	}
	return lo, hi, nil
}

// HostCheck says where the GPU finds what it checks at a host point: the
// router's expert ids (PerRow a row, for the window's live rows, at most
// Rows), the layer's smap entries (Miss marks an expert not resident), and
// the predictions the host reads besides (Reads, PerRow a row each).
type HostCheck struct {
	IDs    graph.Range
	PerRow int
	Rows   int
	Smap   graph.Range
	Miss   uint32
	Reads  []graph.Range
}

// HostSeen is what the GPU hands the host at a checked host point: copies
// of the live rows' ids and of the reads, and whether it found every
// routed expert resident and ran on without waiting for the host.
type HostSeen struct {
	IDs      []uint32
	Reads    [][]uint32
	Resident bool
}

// CheckedProgram is a HostProgram whose GPU checks each host point's
// routed experts against the smap itself and waits for the host only where
// one is missing (the host is still called at every point, in order, to
// keep its residency bookkeeping; it may then run behind the GPU, so it
// must not evict an expert of a layer the GPU may be running: one after
// the point's own, in this window). checks[k] describes host point k.
type CheckedProgram interface {
	HostProgram
	RunChecked(checks []HostCheck, host func(graph.HostPoint, HostSeen) error) error
}

// Backend executes window graphs. Compile takes only a Memory the same
// backend made. A backend that is an io.Closer is closed with the model it
// loaded (engine.Model.Close), which releases its memories and programs.
type Backend interface {
	NewMemory(graphs ...*graph.Graph) (Memory, error)
	Compile(g *graph.Graph, mem Memory) (Program, error)
}

// InPlace is a Backend whose Memory takes graph.KindMapped buffers from the
// loader (MappedMemory.Wrap) instead of allocating them, so weights can be
// used where they lie in a mapped file: no copy at load, no second copy in
// memory. InPlaceWeights false turns it off for this backend value.
type InPlace interface {
	Backend
	InPlaceWeights() bool
}

// MappedMemory is the Memory side of InPlace: Wrap backs the KindMapped
// buffer name with host memory the caller owns and keeps mapped for the
// memory's life (a page-aligned stretch of the model file), before any
// Compile. An error (alignment the device cannot wrap) leaves the buffer
// unbacked; the loader then copies the stretch to aligned memory and wraps
// that.
type MappedMemory interface {
	Memory
	Wrap(name string, host []byte) error
}

// Forker is a Backend that can give a model more sets of sequence state
// over one set of weights: Fork returns a Memory whose buffers of the given
// kinds (graph.KindState, graph.KindCache) are its own, fresh and zeroed,
// and every other buffer is base's, the same bytes at the same address.
// Programs compiled against it run on base's weights and scratch with their
// own state, so a server running several sequences binds each window to
// its sequence's programs and copies nothing when it switches. base must be
// a memory this backend made, its mapped buffers already wrapped; a fork
// lives as long as base.
type Forker interface {
	Backend
	Fork(base Memory, kinds ...string) (Memory, error)
}

// Order says how the dispatches inside one barrier group run.
type Order int

const (
	Serial     Order = iota // graph order
	Concurrent              // every dispatch of a group in its own goroutine
	Shuffled                // a random order per group, from a seed
)

// Ordered is a Program that can run the dispatches of a barrier group in
// another order than the graph's (the cpu backend), which shows whether the
// graph's barriers are all it needs.
type Ordered interface {
	Program
	SetOrder(o Order, seed int64)
}
