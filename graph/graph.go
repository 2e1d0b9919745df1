// Package graph is the window-graph IR: for one model and one window shape (T
// rows), the explicit list of GPU dispatches of a forward pass, with the byte
// ranges each reads and writes in named buffers, the host points where the
// runtime makes routed experts resident, and the barrier before each dispatch.
// It has no Metal and no I/O; every backend executes the same Graph.
package graph

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
)

// Buffer kinds. A kind tells the runtime how to back a buffer.
const (
	KindWeights   = "weights"   // filled once from the checkpoint, read-only
	KindExperts   = "experts"   // routed experts (later: the streaming arena)
	KindState     = "state"     // persists across windows, advanced in place: conv windows, recurrent state
	KindScratch   = "scratch"   // activations of one window
	KindParams    = "params"    // per-window values written by the host: rows, position, token ids
	KindCache     = "cache"     // persists across windows, indexed by position: KV and indexer caches
	KindSmap      = "smap"      // smap[layer·E + expert]: where each routed expert sits in the experts arena
	KindResidency = "residency" // the expert residency routing may see (MoCE), written between windows
	KindCarry     = "carry"     // rows one window leaves for the next (the trunk's hidden state for the MTP head)
	// KindMapped is read-only memory the loader provides (a stretch of a
	// memory-mapped model file whose tensors are used in place): backends
	// allocate nothing for it and must have it wrapped before running.
	KindMapped = "mapped"
)

// Graph kinds: the model's forward window, or its MTP draft head.
const (
	KindTrunk = "trunk"
	KindMTP   = "mtp"
)

// Buffer is a named, flat byte buffer.
type Buffer struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	Size int64  `json:"size"`
}

// Tensor places a weight role inside a buffer. Stacked tensors (routed experts)
// have Stride > 0: slice i of the leading dimension starts at Offset + i*Stride.
// Format is the storage format actually used (a row policy may have picked a
// fallback for the planned one). Stored > 0 means each row of Shape's last
// dimension is zero-padded to Stored elements, whole blocks of Format.
type Tensor struct {
	Name   string `json:"name"`
	Buffer string `json:"buffer"`
	Offset int64  `json:"offset"`
	Format string `json:"format"`
	Shape  []int  `json:"shape"`
	Stride int64  `json:"stride,omitempty"`
	Stored int    `json:"stored,omitempty"`
}

// RowStored is the number of elements stored per row: Stored, or the last
// dimension when rows are not padded.
func (t Tensor) RowStored() int {
	if t.Stored > 0 || len(t.Shape) == 0 {
		return t.Stored
	}
	return t.Shape[len(t.Shape)-1]
}

// Range is a half-open byte range [Offset, Offset+Size) of a buffer.
type Range struct {
	Buffer string `json:"buffer"`
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
}

// End is the first byte past the range.
func (r Range) End() int64 { return r.Offset + r.Size }

// Overlaps reports whether two ranges share a byte.
func (r Range) Overlaps(o Range) bool {
	return r.Buffer == o.Buffer && r.Offset < o.End() && o.Offset < r.End()
}

// Access modes of a binding.
const (
	Read      = "r"
	Write     = "w"
	ReadWrite = "rw"
)

// Binding binds a byte range of a buffer to an argument slot of a kernel.
type Binding struct {
	Slot   int    `json:"slot"`
	Name   string `json:"name"`
	Access string `json:"access"`
	Range
}

// Const is one specialization value (a function constant on Metal).
type Const struct {
	Name  ConstName `json:"name"`
	Value int64     `json:"value"`
}

// Scalar is a float argument of a kernel (eps, rope theta): floats stay out of
// function constants and travel in the argument struct.
type Scalar struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Dispatch is one kernel launch.
type Dispatch struct {
	Kernel      string    `json:"kernel"` // family + specialization, unique per pipeline
	Family      Family    `json:"family"`
	Layer       int       `json:"layer"`             // -1 outside the layers
	Consts      []Const   `json:"consts"`            // loop-shaping integers (function constants)
	Scalars     []Scalar  `json:"scalars,omitempty"` // float arguments (argument struct)
	Grid        [3]int    `json:"grid"`              // threadgroups per grid
	Threadgroup [3]int    `json:"threadgroup"`       // threads per threadgroup
	Args        []Binding `json:"args"`
	Reads       []Range   `json:"reads"`
	Writes      []Range   `json:"writes"`
	Barrier     bool      `json:"barrier"` // a buffer barrier precedes this dispatch
}

// Const returns the specialization value called name.
func (d *Dispatch) Const(name ConstName) (int64, bool) {
	for _, c := range d.Consts {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

// Scalar returns the float argument called name.
func (d *Dispatch) Scalar(name string) (float64, bool) {
	for _, s := range d.Scalars {
		if s.Name == name {
			return s.Value, true
		}
	}
	return 0, false
}

// Arg returns the binding called name.
func (d *Dispatch) Arg(name string) (Binding, bool) {
	for _, b := range d.Args {
		if b.Name == name {
			return b, true
		}
	}
	return Binding{}, false
}

// HostPoint marks where the window signals the host and waits for it: after
// dispatch After (an index into Dispatches, the router of Layer) the window
// signals the host, which makes the experts that router chose resident; the
// GPU runs the dispatches before Wait meanwhile (work that does not need the
// host, such as the shared expert) and waits for the host before dispatch
// Wait. Wait is in (After, next host point's After], or len(Dispatches) when
// nothing after the last host point needs the host; 0 means not placed yet
// (Reorder places it).
type HostPoint struct {
	Layer int `json:"layer"`
	After int `json:"after"`
	Wait  int `json:"wait"`
	// Reads are what the host reads besides the router's output (the
	// read-ahead prediction for the next layer).
	Reads []Range `json:"reads,omitempty"`
}

// Param is a named field of the params buffer.
type Param struct {
	Name   string `json:"name"`
	Offset int64  `json:"offset"`
	Count  int    `json:"count"` // uint32 elements
}

// Graph is the window graph of one model at one window shape.
type Graph struct {
	Model      string      `json:"model"`
	Kind       string      `json:"kind"`          // KindTrunk or KindMTP
	Rows       int         `json:"rows"`          // T: the most rows a window of this shape carries
	LogitRows  int         `json:"logit_rows"`    // T, or 1 when only the last row's logits are computed
	Buffers    []Buffer    `json:"buffers"`       // in a fixed order
	Tensors    []Tensor    `json:"tensors"`       // weight placement
	Params     []Param     `json:"params"`        // layout of the params buffer
	Dispatches []Dispatch  `json:"dispatches"`    // in execution order
	HostPoints []HostPoint `json:"host_points"`   // ascending by After
	Outputs    []Range     `json:"outputs"`       // logits, and anything else the host reads back
	ICB        *ICBPlan    `json:"icb,omitempty"` // replay plan, filled by Optimize
}

// Buffer returns the buffer called name.
func (g *Graph) Buffer(name string) (Buffer, bool) {
	for _, b := range g.Buffers {
		if b.Name == name {
			return b, true
		}
	}
	return Buffer{}, false
}

// Param returns the params field called name.
func (g *Graph) Param(name string) (Param, bool) {
	for _, p := range g.Params {
		if p.Name == name {
			return p, true
		}
	}
	return Param{}, false
}

// WriteParams writes a window's rows (the tokens' count), position and
// token ids into buf, the params buffer: what every window of g reads
// before anything else. An error names a field g lacks room for.
func (g *Graph) WriteParams(buf []byte, tokens []int, pos int) error {
	put := func(name string, i int, v uint32) error {
		p, ok := g.Param(name)
		if !ok || i >= p.Count {
			return fmt.Errorf("window graph T=%d has no params field %s[%d]", g.Rows, name, i)
		}
		binary.LittleEndian.PutUint32(buf[p.Offset+4*int64(i):], v)
		return nil
	}
	if err := put(ParamRows, 0, uint32(len(tokens))); err != nil {
		return err
	}
	if err := put(ParamPos, 0, uint32(pos)); err != nil {
		return err
	}
	for i, t := range tokens {
		if err := put(ParamTokens, i, uint32(t)); err != nil {
			return err
		}
	}
	return nil
}

// Output returns the output range at index i, or an error.
func (g *Graph) Output(i int) (Range, error) {
	if i < 0 || i >= len(g.Outputs) {
		return Range{}, fmt.Errorf("graph %s/T=%d has %d outputs, asked for %d", g.Model, g.Rows, len(g.Outputs), i)
	}
	return g.Outputs[i], nil
}

// Groups splits the dispatches into barrier groups: each group starts at a
// dispatch with Barrier set (or at the first dispatch). Dispatches of one group
// may run in any order or concurrently.
func (g *Graph) Groups() [][]int {
	var out [][]int
	for i := range g.Dispatches {
		if i == 0 || g.Dispatches[i].Barrier {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], i)
	}
	return out
}

// JSON is the canonical, deterministic JSON form (indented, fields in
// declaration order).
func (g *Graph) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(g, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encoding window graph %s/T=%d: %w", g.Model, g.Rows, err)
	}
	return append(b, '\n'), nil
}

// Decode parses a finished graph from its JSON form and validates it
// (Validate).
func Decode(data []byte) (*Graph, error) {
	var g Graph
	if err := json.Unmarshal(data, &g); err != nil {
		return nil, fmt.Errorf("decoding window graph: %w", err)
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return &g, nil
}

// Check verifies that every range lies inside a declared buffer and that host
// points are in order.
func (g *Graph) Check() error {
	sizes := map[string]int64{}
	for _, b := range g.Buffers {
		if _, dup := sizes[b.Name]; dup {
			return fmt.Errorf("graph %s/T=%d: buffer %q declared twice", g.Model, g.Rows, b.Name)
		}
		sizes[b.Name] = b.Size
	}
	inside := func(r Range, what string) error {
		size, ok := sizes[r.Buffer]
		if !ok {
			return fmt.Errorf("graph %s/T=%d: %s uses undeclared buffer %q", g.Model, g.Rows, what, r.Buffer)
		}
		if r.Offset < 0 || r.Size < 0 || r.End() > size {
			return fmt.Errorf("graph %s/T=%d: %s range [%d,%d) outside buffer %q of %d bytes", g.Model, g.Rows, what, r.Offset, r.End(), r.Buffer, size)
		}
		return nil
	}
	for i, d := range g.Dispatches {
		what := fmt.Sprintf("dispatch %d (%s)", i, d.Kernel)
		for _, lists := range [][]Range{d.Reads, d.Writes} {
			for _, r := range lists {
				if err := inside(r, what); err != nil {
					return err
				}
			}
		}
		for _, b := range d.Args {
			if err := inside(b.Range, what+" arg "+b.Name); err != nil {
				return err
			}
		}
	}
	for _, t := range g.Tensors {
		if _, ok := sizes[t.Buffer]; !ok {
			return fmt.Errorf("graph %s/T=%d: tensor %s in undeclared buffer %q", g.Model, g.Rows, t.Name, t.Buffer)
		}
	}
	for _, r := range g.Outputs {
		if err := inside(r, "output"); err != nil {
			return err
		}
	}
	for i, h := range g.HostPoints {
		if h.After < 0 || h.After >= len(g.Dispatches) || (i > 0 && h.After < g.HostPoints[i-1].After) {
			return fmt.Errorf("graph %s/T=%d: host point %d after dispatch %d is out of order or range", g.Model, g.Rows, i, h.After)
		}
		limit := len(g.Dispatches)
		if i+1 < len(g.HostPoints) {
			limit = g.HostPoints[i+1].After
		}
		if h.Wait != 0 && (h.Wait <= h.After || h.Wait > limit) {
			return fmt.Errorf("graph %s/T=%d: host point %d waits before dispatch %d, outside (%d, %d]", g.Model, g.Rows, i, h.Wait, h.After, limit)
		}
	}
	if g.ICB != nil && len(g.ICB.Commands) != len(g.Dispatches) {
		return fmt.Errorf("graph %s/T=%d: ICB plan has %d commands for %d dispatches", g.Model, g.Rows, len(g.ICB.Commands), len(g.Dispatches))
	}
	return nil
}
