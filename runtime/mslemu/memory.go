package mslemu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/buffers"
)

// Memory holds a model's named buffers in mapped memory (never moved or
// freed by Go's collector, so the kernels may keep addresses into it), sized
// and zeroed as the cpu backend's buffers.Memory. With a sanitizer, each
// buffer is a memfd the child process maps too.
type Memory struct {
	buffers.Table
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

var _ backend.Memory = (*Memory)(nil)

func newMemory(shared bool, graphs ...*graph.Graph) (*Memory, error) {
	m := &Memory{Table: buffers.Table{Index: map[string]int{}}, held: &held{}}
	runtime.AddCleanup(m, func(h *held) { h.release() }, m.held)
	var sizes []int64
	for _, g := range graphs {
		for _, b := range g.Buffers {
			i, ok := m.Index[b.Name]
			if !ok {
				i = len(m.Names)
				m.Index[b.Name] = i
				m.Names = append(m.Names, b.Name)
				m.Kinds = append(m.Kinds, b.Kind)
				sizes = append(sizes, b.Size)
				continue
			}
			if m.Kinds[i] != b.Kind {
				return nil, fmt.Errorf("buffer %s is %s in one graph and %s in another", b.Name, m.Kinds[i], b.Kind)
			}
			persistent := b.Kind == graph.KindWeights || b.Kind == graph.KindExperts || b.Kind == graph.KindState || b.Kind == graph.KindCache
			if persistent && sizes[i] != b.Size {
				return nil, fmt.Errorf("%s buffer %s has %d bytes in one window graph and %d in another: the shapes do not share a layout", b.Kind, b.Name, sizes[i], b.Size)
			}
			sizes[i] = max(sizes[i], b.Size)
		}
	}
	for i, name := range m.Names {
		align := int64(1)
		if m.Kinds[i] == graph.KindExperts {
			align = graph.ExpertPage
		}
		mapping, buf, f, err := allocate(name, sizes[i], align, shared)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("mslemu: buffer %s of %d bytes: %w", name, sizes[i], err)
		}
		m.maps = append(m.maps, mapping)
		m.Bufs = append(m.Bufs, buf)
		m.files = append(m.files, f)
	}
	return m, nil
}

// Close stops the sanitizer process and unmaps the buffers; the Memory must
// not be used after.
func (m *Memory) Close() error {
	m.Bufs = nil
	m.Index = map[string]int{}
	return m.release()
}

// aligned is the n bytes of mapping starting at its first multiple of align.
func aligned(mapping []byte, n, align int64) []byte {
	skip := int64(-uintptr(unsafe.Pointer(&mapping[0]))) & (align - 1)
	return mapping[skip : skip+n : skip+n]
}
