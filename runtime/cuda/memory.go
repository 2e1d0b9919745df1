package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/engine"
)

// Memory holds a model's named buffers where both the host and the GPU
// reach them at one address: managed memory (pages move to whichever side
// touches them; the GPU keeps the weights after the first window), or with
// Options.Pinned page-locked host memory. The host reads and writes them
// between windows, and at host points while the GPU runs other buffers.
type Memory struct {
	b      *Backend
	names  []string
	index  map[string]int
	kinds  []string
	bufs   [][]byte
	ptrs   []uintptr // device addresses
	pinned bool
}

var _ engine.Memory = (*Memory)(nil)

// hostSlice is n bytes at address p, which the driver gave and Go's
// collector does not manage.
func hostSlice(p uintptr, n int64) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n)
}

func (b *Backend) newMemory(graphs ...*graph.Graph) (*Memory, error) {
	m := &Memory{b: b, index: map[string]int{}, pinned: b.opt.Pinned}
	var sizes []int64
	for _, g := range graphs {
		for _, buf := range g.Buffers {
			i, ok := m.index[buf.Name]
			if !ok {
				m.index[buf.Name] = len(m.names)
				m.names = append(m.names, buf.Name)
				m.kinds = append(m.kinds, buf.Kind)
				sizes = append(sizes, buf.Size)
				continue
			}
			if m.kinds[i] != buf.Kind {
				return nil, fmt.Errorf("cuda: buffer %s is %s in one graph and %s in another", buf.Name, m.kinds[i], buf.Kind)
			}
			sizes[i] = max(sizes[i], buf.Size)
		}
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	err := b.do(func() error {
		d := b.d
		var free, all uintptr
		if err := d.check("cuMemGetInfo", d.memGetInfo(&free, &all)); err != nil {
			return err
		}
		// Never ask for more managed memory than the card has free.
		if !m.pinned && total > int64(free)*9/10 {
			return fmt.Errorf("cuda: the buffers need %d MiB, the GPU has %d MiB free", total>>20, free>>20)
		}
		for i, name := range m.names {
			size := max(sizes[i], 256)
			var p uintptr
			if m.pinned {
				var host unsafe.Pointer
				if err := d.check("cuMemHostAlloc", d.memHostAlloc(&host, uintptr(size), hostAllocPortable|hostAllocDevMap)); err != nil {
					return fmt.Errorf("buffer %s of %d bytes: %w", name, size, err)
				}
				if err := d.check("cuMemHostGetDevicePointer", d.memHostDevPtr(&p, host, 0)); err != nil {
					d.memFreeHost(host)
					return err
				}
				m.bufs = append(m.bufs, unsafe.Slice((*byte)(host), size)[:sizes[i]])
				clear(m.bufs[i])
			} else {
				if err := d.check("cuMemAllocManaged", d.memAllocManaged(&p, uintptr(size), memAttachGlobal)); err != nil {
					return fmt.Errorf("buffer %s of %d bytes: %w", name, size, err)
				}
				if err := d.check("cuMemsetD8Async", d.memsetD8Async(p, 0, uintptr(size), 0)); err != nil {
					return err
				}
				m.bufs = append(m.bufs, hostSlice(p, size)[:sizes[i]])
			}
			m.ptrs = append(m.ptrs, p)
		}
		return d.check("cuCtxSynchronize", d.ctxSynchronize())
	})
	if err != nil {
		m.release()
		return nil, fmt.Errorf("cuda: %w", err)
	}
	b.mu.Lock()
	b.memories = append(b.memories, m)
	b.mu.Unlock()
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
		return b, nil
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

// ptr is the device address of a binding.
func (m *Memory) ptr(buffer string, offset int64) (uintptr, error) {
	i, ok := m.index[buffer]
	if !ok {
		return 0, fmt.Errorf("no buffer %q", buffer)
	}
	if offset < 0 || offset > int64(len(m.bufs[i])) {
		return 0, fmt.Errorf("offset %d outside buffer %s of %d bytes", offset, buffer, len(m.bufs[i]))
	}
	return m.ptrs[i] + uintptr(offset), nil
}

func (m *Memory) release() error {
	if m.ptrs == nil {
		return nil
	}
	ptrs, bufs := m.ptrs, m.bufs
	m.ptrs, m.bufs, m.index = nil, nil, map[string]int{}
	var errs []error
	err := m.b.do(func() error {
		for i, p := range ptrs {
			if m.pinned {
				errs = append(errs, m.b.d.check("cuMemFreeHost", m.b.d.memFreeHost(unsafe.Pointer(unsafe.SliceData(bufs[i])))))
			} else {
				errs = append(errs, m.b.d.check("cuMemFree", m.b.d.memFree(p)))
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}
