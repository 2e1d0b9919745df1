// Package buffers backs the named buffers of window graphs with host memory and
// gives typed views of them.
package buffers

import (
	"fmt"
	"unsafe"

	"github.com/strata-llm/strata/graph"
)

// Memory backs the named buffers of a model's window graphs. All window shapes
// of one model share weights and state; scratch and params are sized for the
// largest shape, since one window runs at a time.
type Memory struct {
	bufs  map[string][]byte
	kinds map[string]string
	sizes map[string]int64
}

// NewMemory allocates every buffer any of the graphs declares, at the largest
// size asked. Buffers are 8-byte aligned and zeroed.
func NewMemory(graphs ...*graph.Graph) (*Memory, error) {
	sizes := map[string]int64{}
	kinds := map[string]string{}
	var order []string
	for _, g := range graphs {
		for _, b := range g.Buffers {
			if k, ok := kinds[b.Name]; ok && k != b.Kind {
				return nil, fmt.Errorf("buffer %s is %s in one graph and %s in another", b.Name, k, b.Kind)
			}
			if _, ok := sizes[b.Name]; !ok {
				order = append(order, b.Name)
			}
			kinds[b.Name] = b.Kind
			if b.Kind == graph.KindWeights || b.Kind == graph.KindExperts || b.Kind == graph.KindState || b.Kind == graph.KindCache || b.Kind == graph.KindMapped {
				if s, ok := sizes[b.Name]; ok && s != b.Size {
					return nil, fmt.Errorf("%s buffer %s has %d bytes in one window graph and %d in another: the shapes do not share a layout", b.Kind, b.Name, s, b.Size)
				}
			}
			sizes[b.Name] = max(sizes[b.Name], b.Size)
		}
	}
	m := &Memory{bufs: map[string][]byte{}, kinds: kinds, sizes: sizes}
	for _, name := range order {
		if kinds[name] == graph.KindMapped {
			continue // the loader wraps file memory there
		}
		align := 8
		if kinds[name] == graph.KindExperts {
			align = graph.ExpertPage
		}
		m.bufs[name] = AlignedBytes(sizes[name], align)
	}
	return m, nil
}

// AlignedBytes returns n zeroed bytes whose start is a multiple of align (a
// power of two ≥ 8). They are backed by uint64s, so float32 and uint32 views
// of any 4-aligned offset are valid.
func AlignedBytes(n int64, align int) []byte {
	if n == 0 {
		return []byte{}
	}
	if align < 8 || align&(align-1) != 0 {
		panic(fmt.Sprintf("buffers: alignment %d is not a power of two ≥ 8", align))
	}
	words := make([]uint64, (n+int64(align)+7)/8)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	skip := int(-uintptr(unsafe.Pointer(&words[0])) & uintptr(align-1))
	return b[skip : int64(skip)+n : int64(skip)+n]
}

// Bytes returns the bytes of a range, with capacity clipped to the range so a
// kernel cannot write past what its binding declares.
func (m *Memory) Bytes(r graph.Range) ([]byte, error) {
	b, ok := m.bufs[r.Buffer]
	if !ok {
		return nil, fmt.Errorf("no buffer %q", r.Buffer)
	}
	if r.Size == 0 && r.Offset == 0 {
		return b, nil // a binding of a buffer sized at run time (the expert arena)
	}
	if r.Offset < 0 || r.Size < 0 || r.End() > int64(len(b)) {
		return nil, fmt.Errorf("range [%d,%d) outside buffer %q of %d bytes", r.Offset, r.End(), r.Buffer, len(b))
	}
	return b[r.Offset:r.End():r.End()], nil
}

// Wrap backs a graph.KindMapped buffer with host memory the caller owns and
// keeps alive (a stretch of a mapped model file), used in place.
func (m *Memory) Wrap(name string, host []byte) error {
	size, ok := m.sizes[name]
	switch {
	case !ok:
		return fmt.Errorf("no buffer %q to wrap", name)
	case m.kinds[name] != graph.KindMapped:
		return fmt.Errorf("buffer %s is %s, not %s: only mapped buffers are wrapped", name, m.kinds[name], graph.KindMapped)
	case int64(len(host)) < size:
		return fmt.Errorf("buffer %s: %d bytes of host memory for a %d-byte buffer", name, len(host), size)
	}
	m.bufs[name] = host[:size:size]
	return nil
}

// Clear zeroes every buffer of a kind (graph.KindState: a new sequence).
func (m *Memory) Clear(kind string) {
	for name, k := range m.kinds {
		if k == kind {
			clear(m.bufs[name])
		}
	}
}

// Snapshot copies every buffer of a kind into dst (reused when large
// enough) and returns it; Restore puts such a copy back. Speculative decoding
// snapshots the rolling state before a verify window and restores it when
// drafts are rejected.
func (m *Memory) Snapshot(kind string, dst map[string][]byte) map[string][]byte {
	if dst == nil {
		dst = map[string][]byte{}
	}
	for name, k := range m.kinds {
		if k == kind {
			dst[name] = append(dst[name][:0], m.bufs[name]...)
		}
	}
	return dst
}

// Restore copies a snapshot back.
func (m *Memory) Restore(snap map[string][]byte) {
	for name, b := range snap {
		copy(m.bufs[name], b)
	}
}

// Buffer returns a whole buffer.
func (m *Memory) Buffer(name string) []byte { return m.bufs[name] }

// Float32s views bytes as float32s (the length must be a multiple of 4 and the
// start 4-aligned, which every region of a window graph is).
func Float32s(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// Uint32s views bytes as uint32s.
func Uint32s(b []byte) []uint32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}
