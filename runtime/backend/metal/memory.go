package metal

import (
	"fmt"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Memory backs the named buffers of a model's window graphs with MTLBuffers
// over host memory the CPU and GPU share (no copies: the host writes params
// and weights in place and reads logits in place). The host side is
// backend.HostMemory, laid out as for every backend; Memory adds the MTLBuffer
// behind each buffer.
type Memory struct {
	*backend.HostMemory
	b       *Backend
	handles []Buffer // by position in Layout; zero: none (a mapped buffer before Wrap)
	sealed  bool     // a program is bound to the handles: no more Wrap
}

// NewMemory creates every buffer any of the graphs declares (backend.Layout:
// each at the largest size asked; weights, experts, state and caches agree
// across shapes), over fresh shared pages; mapped buffers wait for Wrap.
func (b *Backend) NewMemory(graphs ...*graph.Graph) (*Memory, error) {
	layout, err := backend.Layout(graphs...)
	if err != nil {
		return nil, err
	}
	m := &Memory{b: b, handles: make([]Buffer, len(layout))}
	host := make([][]byte, len(layout))
	info := b.info
	err = b.do(func() error {
		for i, l := range layout {
			if l.Kind == graph.KindMapped {
				continue // Wrap gives it the loader's memory
			}
			if info.MaxBufferLength > 0 && l.Size > info.MaxBufferLength {
				return fmt.Errorf("%s buffer %s needs %d bytes, more than the device's largest buffer (%d bytes)", l.Kind, l.Name, l.Size, info.MaxBufferLength)
			}
			h, mem, err := b.dev.NewBuffer(l.Name, l.Size)
			if err != nil {
				return fmt.Errorf("%s buffer %s (%d bytes): %w", l.Kind, l.Name, l.Size, err)
			}
			m.handles[i] = h
			if mem != nil {
				host[i] = mem[:l.Size:l.Size]
			}
		}
		return nil
	})
	if err == nil {
		m.HostMemory, err = backend.WrapHostMemory(layout, host)
	}
	if err != nil {
		m.release()
		return nil, err
	}
	b.track(m)
	return m, nil
}

// Wrap replaces buffer name with host memory the caller owns and keeps
// mapped (a memory-mapped weights file), wrapped without a copy. host must
// start on a page and span whole pages, at least the buffer's size. Wrap
// must come before Compile.
func (m *Memory) Wrap(name string, host []byte) error {
	if m.sealed {
		return fmt.Errorf("buffer %s: wrap before compiling programs, which hold the old buffer", name)
	}
	return m.WrapWith(name, host, func(i int, host []byte) error {
		page := m.b.info.PageSize
		if page > 0 && (int64(len(host))%page != 0 || int64(uintptr(unsafe.Pointer(unsafe.SliceData(host))))%page != 0) {
			return fmt.Errorf("buffer %s: host memory must start on a %d-byte page and span whole pages to be wrapped without a copy", name, page)
		}
		return m.b.do(func() error {
			h, err := m.b.dev.WrapBuffer(name, host)
			if err != nil {
				return fmt.Errorf("wrapping buffer %s: %w", name, err)
			}
			if m.handles[i] != 0 {
				m.b.dev.Release(uintptr(m.handles[i]))
			}
			m.handles[i] = h
			return nil
		})
	})
}

// Handle returns the MTLBuffer backing a named buffer.
func (m *Memory) Handle(name string) (Buffer, bool) {
	i, ok := m.Index(name)
	if !ok {
		return 0, false
	}
	return m.handles[i], true
}

// release releases the buffers (on the backend's thread).
func (m *Memory) release() {
	_ = m.b.do(func() error {
		for i, h := range m.handles {
			if h != 0 {
				m.b.dev.Release(uintptr(h))
				m.handles[i] = 0
			}
		}
		return nil
	})
	if m.HostMemory != nil {
		m.Drop()
	}
}
