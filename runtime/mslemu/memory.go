package mslemu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/engine"
)

// Memory holds a model's named buffers in mapped memory (never moved or
// freed by Go's collector, so the kernels may keep addresses into it), sized
// and zeroed as the cpu backend's buffers.Memory. With a sanitizer, each
// buffer is a memfd the child process maps too.
type Memory struct {
	names []string
	index map[string]int
	kinds []string
	bufs  [][]byte // the buffers
	*held
}

// held is what a Memory must give back: released by Close, or when the
// Memory is collected (the engine never closes its memory).
type held struct {
	maps  [][]byte   // the mappings holding the buffers (experts are aligned inside)
	files []*os.File // memfds, when shared
	child *child
}

func (h *held) release() error {
	var errs []error
	if h.child != nil {
		errs = append(errs, h.child.close())
		h.child = nil
	}
	for i := range h.maps {
		if h.maps[i] != nil {
			errs = append(errs, unmap(h.maps[i]))
		}
		if h.files[i] != nil {
			errs = append(errs, h.files[i].Close())
		}
	}
	h.maps, h.files = nil, nil
	return errors.Join(errs...)
}

var _ engine.Memory = (*Memory)(nil)

func newMemory(shared bool, graphs ...*graph.Graph) (*Memory, error) {
	m := &Memory{index: map[string]int{}, held: &held{}}
	runtime.AddCleanup(m, func(h *held) { h.release() }, m.held)
	var sizes []int64
	for _, g := range graphs {
		for _, b := range g.Buffers {
			i, ok := m.index[b.Name]
			if !ok {
				i = len(m.names)
				m.index[b.Name] = i
				m.names = append(m.names, b.Name)
				m.kinds = append(m.kinds, b.Kind)
				sizes = append(sizes, b.Size)
				continue
			}
			if m.kinds[i] != b.Kind {
				return nil, fmt.Errorf("buffer %s is %s in one graph and %s in another", b.Name, m.kinds[i], b.Kind)
			}
			persistent := b.Kind == graph.KindWeights || b.Kind == graph.KindExperts || b.Kind == graph.KindState || b.Kind == graph.KindCache
			if persistent && sizes[i] != b.Size {
				return nil, fmt.Errorf("%s buffer %s has %d bytes in one window graph and %d in another: the shapes do not share a layout", b.Kind, b.Name, sizes[i], b.Size)
			}
			sizes[i] = max(sizes[i], b.Size)
		}
	}
	for i, name := range m.names {
		align := int64(1)
		if m.kinds[i] == graph.KindExperts {
			align = graph.ExpertPage
		}
		mapping, buf, f, err := allocate(name, sizes[i], align, shared)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("mslemu: buffer %s of %d bytes: %w", name, sizes[i], err)
		}
		m.maps = append(m.maps, mapping)
		m.bufs = append(m.bufs, buf)
		m.files = append(m.files, f)
	}
	return m, nil
}

// Bytes returns the bytes of a range, capacity clipped to it.
func (m *Memory) Bytes(r graph.Range) ([]byte, error) {
	i, ok := m.index[r.Buffer]
	if !ok {
		return nil, fmt.Errorf("no buffer %q", r.Buffer)
	}
	b := m.bufs[i]
	if r.Size == 0 && r.Offset == 0 {
		return b, nil // a binding of a buffer sized at run time (the expert arena)
	}
	if r.Offset < 0 || r.Size < 0 || r.End() > int64(len(b)) {
		return nil, fmt.Errorf("range [%d,%d) outside buffer %q of %d bytes", r.Offset, r.End(), r.Buffer, len(b))
	}
	return b[r.Offset:r.End():r.End()], nil
}

// Buffer returns a whole buffer (nil for one no graph declares).
func (m *Memory) Buffer(name string) []byte {
	if i, ok := m.index[name]; ok {
		return m.bufs[i]
	}
	return nil
}

// Clear zeroes every buffer of a kind.
func (m *Memory) Clear(kind string) {
	for i, k := range m.kinds {
		if k == kind {
			clear(m.bufs[i])
		}
	}
}

// Snapshot copies every buffer of a kind into dst (reused when large
// enough) and returns it; Restore puts such a copy back.
func (m *Memory) Snapshot(kind string, dst map[string][]byte) map[string][]byte {
	if dst == nil {
		dst = map[string][]byte{}
	}
	for i, k := range m.kinds {
		if k == kind {
			dst[m.names[i]] = append(dst[m.names[i]][:0], m.bufs[i]...)
		}
	}
	return dst
}

// Restore copies a snapshot back.
func (m *Memory) Restore(snap map[string][]byte) {
	for name, b := range snap {
		copy(m.Buffer(name), b)
	}
}

// Close stops the sanitizer process and unmaps the buffers; the Memory must
// not be used after.
func (m *Memory) Close() error {
	m.bufs = nil
	m.index = map[string]int{}
	return m.release()
}

// aligned is the n bytes of mapping starting at its first multiple of align.
func aligned(mapping []byte, n, align int64) []byte {
	skip := int64(-uintptr(unsafe.Pointer(&mapping[0]))) & (align - 1)
	return mapping[skip : skip+n : skip+n]
}
