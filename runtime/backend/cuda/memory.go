package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Memory holds a model's named buffers where both the host and the GPU
// reach them at one address: managed memory (pages move to whichever side
// touches them; the GPU keeps the weights after the first window), or with
// Options.Pinned page-locked host memory. The host reads and writes them
// between windows, and at host points while the GPU runs other buffers.
// The host side is backend.HostMemory, laid out as for every backend; Memory
// adds the device addresses.
type Memory struct {
	*backend.HostMemory
	b      *Backend
	ptrs   []uintptr // device addresses of the buffers
	allocs []uintptr // what the driver allocated (the experts start a page inside)
	pinned bool
}

var _ backend.Memory = (*Memory)(nil)

// hostSlice is n bytes at address p, which the driver gave and Go's
// collector does not manage.
func hostSlice(p uintptr, n int64) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n)
}

func (b *Backend) newMemory(graphs ...*graph.Graph) (*Memory, error) {
	layout, err := backend.Layout(graphs...)
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	m := &Memory{b: b, pinned: b.opt.Pinned}
	host := make([][]byte, len(layout))
	var total int64
	for _, l := range layout {
		total += l.Size
	}
	err = b.do(func() error {
		d := b.d
		var free, all uintptr
		if err := d.check("cuMemGetInfo", d.memGetInfo(&free, &all)); err != nil {
			return err
		}
		// Never ask for more managed memory than the card has free.
		if !m.pinned && total > int64(free)*9/10 {
			return fmt.Errorf("cuda: the buffers need %d MiB, the GPU has %d MiB free", total>>20, free>>20)
		}
		for i, l := range layout {
			// The driver aligns to 256 bytes at least; a buffer that needs
			// more (the experts' pages) is allocated larger and starts inside.
			align := int64(backend.Align(l.Kind))
			size := max(l.Size, 256)
			if align > 256 {
				size += align
			}
			var p, alloc uintptr
			var h []byte
			if m.pinned {
				var ptr unsafe.Pointer
				if err := d.check("cuMemHostAlloc", d.memHostAlloc(&ptr, uintptr(size), hostAllocPortable|hostAllocDevMap)); err != nil {
					return fmt.Errorf("buffer %s of %d bytes: %w", l.Name, size, err)
				}
				if err := d.check("cuMemHostGetDevicePointer", d.memHostDevPtr(&p, ptr, 0)); err != nil {
					d.memFreeHost(ptr)
					return err
				}
				alloc, h = uintptr(ptr), unsafe.Slice((*byte)(ptr), size)
				clear(h)
			} else {
				if err := d.check("cuMemAllocManaged", d.memAllocManaged(&p, uintptr(size), memAttachGlobal)); err != nil {
					return fmt.Errorf("buffer %s of %d bytes: %w", l.Name, size, err)
				}
				if err := d.check("cuMemsetD8Async", d.memsetD8Async(p, 0, uintptr(size), 0)); err != nil {
					d.memFree(p)
					return err
				}
				alloc, h = p, hostSlice(p, size)
			}
			skip := int64(-uintptr(unsafe.Pointer(unsafe.SliceData(h)))) & (align - 1)
			m.allocs = append(m.allocs, alloc)
			m.ptrs = append(m.ptrs, p+uintptr(skip))
			host[i] = h[skip : skip+l.Size : skip+l.Size]
		}
		return d.check("cuCtxSynchronize", d.ctxSynchronize())
	})
	if err == nil {
		m.HostMemory, err = backend.WrapHostMemory(layout, host)
	}
	if err != nil {
		m.release()
		return nil, fmt.Errorf("cuda: %w", err)
	}
	b.mu.Lock()
	b.memories = append(b.memories, m)
	b.mu.Unlock()
	return m, nil
}

// Wrap refuses: the GPU reaches only memory the driver allocated or
// registered, so the backend copies every weight.
func (m *Memory) Wrap(name string, _ []byte) error {
	return fmt.Errorf("cuda: buffer %s: the CUDA backend does not use weights in place", name)
}

// ptr is the device address of a binding.
func (m *Memory) ptr(buffer string, offset int64) (uintptr, error) {
	i, ok := m.Index(buffer)
	if !ok {
		return 0, fmt.Errorf("no buffer %q", buffer)
	}
	if n := int64(len(m.Host(i))); offset < 0 || offset > n {
		return 0, fmt.Errorf("offset %d outside buffer %s of %d bytes", offset, buffer, n)
	}
	return m.ptrs[i] + uintptr(offset), nil
}

func (m *Memory) release() error {
	if m.allocs == nil {
		return nil
	}
	allocs := m.allocs
	m.ptrs, m.allocs = nil, nil
	if m.HostMemory != nil {
		m.Drop()
	}
	var errs []error
	err := m.b.do(func() error {
		for _, p := range allocs {
			if m.pinned {
				errs = append(errs, m.b.d.check("cuMemFreeHost", m.b.d.memFreeHost(*(*unsafe.Pointer)(unsafe.Pointer(&p)))))
			} else {
				errs = append(errs, m.b.d.check("cuMemFree", m.b.d.memFree(p)))
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}
