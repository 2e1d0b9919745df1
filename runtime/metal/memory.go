package metal

import (
	"fmt"
	"unsafe"

	"github.com/strata-llm/strata/graph"
)

// Memory backs the named buffers of a model's window graphs with MTLBuffers
// over host memory the CPU and GPU share (no copies: the host writes params
// and weights in place and reads logits in place). It has the methods of
// runtime/buffers.Memory, so the engine can use either.
type Memory struct {
	b      *Backend
	bufs   map[string]*memBuffer
	order  []string
	sealed bool // a program is bound to the handles: no more Wrap
}

type memBuffer struct {
	name, kind string
	size       int64  // the largest size any graph declares
	host       []byte // len size; nil when the device keeps no host memory
	handle     Buffer
	wrapped    bool // external memory: the caller owns it
}

// NewMemory creates every buffer any of the graphs declares, at the largest
// size asked (one window runs at a time, so shapes share scratch and params;
// weights, experts, state and caches must agree across shapes).
func (b *Backend) NewMemory(graphs ...*graph.Graph) (*Memory, error) {
	m := &Memory{b: b, bufs: map[string]*memBuffer{}}
	for _, g := range graphs {
		for _, gb := range g.Buffers {
			mb, ok := m.bufs[gb.Name]
			if !ok {
				mb = &memBuffer{name: gb.Name, kind: gb.Kind}
				m.bufs[gb.Name] = mb
				m.order = append(m.order, gb.Name)
			}
			if mb.kind != gb.Kind {
				return nil, fmt.Errorf("buffer %s is %s in one graph and %s in another", gb.Name, mb.kind, gb.Kind)
			}
			if fixedLayout(gb.Kind) && ok && mb.size != gb.Size {
				return nil, fmt.Errorf("%s buffer %s has %d bytes in one window graph and %d in another: the shapes do not share a layout", gb.Kind, gb.Name, mb.size, gb.Size)
			}
			mb.size = max(mb.size, gb.Size)
		}
	}
	info := b.info
	err := b.do(func() error {
		for _, name := range m.order {
			mb := m.bufs[name]
			if mb.kind == graph.KindMapped {
				continue // Wrap gives it the loader's memory
			}
			if info.MaxBufferLength > 0 && mb.size > info.MaxBufferLength {
				return fmt.Errorf("%s buffer %s needs %d bytes, more than the device's largest buffer (%d bytes)", mb.kind, name, mb.size, info.MaxBufferLength)
			}
			h, host, err := b.dev.NewBuffer(name, mb.size)
			if err != nil {
				return fmt.Errorf("%s buffer %s (%d bytes): %w", mb.kind, name, mb.size, err)
			}
			mb.handle = h
			if host != nil {
				mb.host = host[:mb.size:mb.size]
			}
		}
		return nil
	})
	if err != nil {
		m.release()
		return nil, err
	}
	b.track(m)
	return m, nil
}

func fixedLayout(kind string) bool {
	return kind == graph.KindWeights || kind == graph.KindExperts || kind == graph.KindState || kind == graph.KindCache || kind == graph.KindMapped
}

// Wrap replaces buffer name with host memory the caller owns and keeps
// mapped (a memory-mapped weights file), wrapped without a copy. host must
// start on a page and span whole pages, at least the buffer's size. Wrap
// must come before Compile.
func (m *Memory) Wrap(name string, host []byte) error {
	mb, ok := m.bufs[name]
	if !ok {
		return fmt.Errorf("no buffer %q to wrap", name)
	}
	if m.sealed {
		return fmt.Errorf("buffer %s: wrap before compiling programs, which hold the old buffer", name)
	}
	page := m.b.info.PageSize
	if int64(len(host)) < mb.size {
		return fmt.Errorf("buffer %s: %d bytes of host memory for a %d-byte buffer", name, len(host), mb.size)
	}
	if page > 0 && (int64(len(host))%page != 0 || int64(uintptr(unsafe.Pointer(unsafe.SliceData(host))))%page != 0) {
		return fmt.Errorf("buffer %s: host memory must start on a %d-byte page and span whole pages to be wrapped without a copy", name, page)
	}
	var h Buffer
	err := m.b.do(func() error {
		var err error
		h, err = m.b.dev.WrapBuffer(name, host)
		if err != nil {
			return fmt.Errorf("wrapping buffer %s: %w", name, err)
		}
		if mb.handle != 0 {
			m.b.dev.Release(uintptr(mb.handle))
		}
		return nil
	})
	if err != nil {
		return err
	}
	mb.handle, mb.host, mb.wrapped = h, host[:mb.size:mb.size], true
	return nil
}

// Handle returns the MTLBuffer backing a named buffer.
func (m *Memory) Handle(name string) (Buffer, bool) {
	mb, ok := m.bufs[name]
	if !ok {
		return 0, false
	}
	return mb.handle, true
}

// Bytes returns the host bytes of a range, capacity clipped to the range.
func (m *Memory) Bytes(r graph.Range) ([]byte, error) {
	mb, ok := m.bufs[r.Buffer]
	if !ok {
		return nil, fmt.Errorf("no buffer %q", r.Buffer)
	}
	if mb.host == nil {
		return nil, fmt.Errorf("buffer %q has no host memory on this device", r.Buffer)
	}
	if r.Offset < 0 || r.Size < 0 || r.End() > int64(len(mb.host)) {
		return nil, fmt.Errorf("range [%d,%d) outside buffer %q of %d bytes", r.Offset, r.End(), r.Buffer, len(mb.host))
	}
	return mb.host[r.Offset:r.End():r.End()], nil
}

// Buffer returns a whole buffer's host bytes (nil if unknown).
func (m *Memory) Buffer(name string) []byte {
	if mb, ok := m.bufs[name]; ok {
		return mb.host
	}
	return nil
}

// Clear zeroes every buffer of a kind (a new sequence clears state). Only
// call it between windows.
func (m *Memory) Clear(kind string) {
	for _, mb := range m.bufs {
		if mb.kind == kind {
			clear(mb.host)
		}
	}
}

// Snapshot copies every buffer of a kind into dst (reused when large enough)
// and returns it; Restore puts such a copy back.
func (m *Memory) Snapshot(kind string, dst map[string][]byte) map[string][]byte {
	if dst == nil {
		dst = map[string][]byte{}
	}
	for name, mb := range m.bufs {
		if mb.kind == kind {
			dst[name] = append(dst[name][:0], mb.host...)
		}
	}
	return dst
}

// Restore copies a snapshot back.
func (m *Memory) Restore(snap map[string][]byte) {
	for name, s := range snap {
		if mb, ok := m.bufs[name]; ok {
			copy(mb.host, s)
		}
	}
}

// release releases the buffers (on the backend's thread).
func (m *Memory) release() {
	_ = m.b.do(func() error {
		for _, mb := range m.bufs {
			if mb.handle != 0 {
				m.b.dev.Release(uintptr(mb.handle))
				mb.handle = 0
			}
		}
		return nil
	})
	for _, mb := range m.bufs {
		mb.host = nil
	}
}
