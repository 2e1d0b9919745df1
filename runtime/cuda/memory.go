package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/buffers"
)

// Memory holds a model's named buffers where both the host and the GPU
// reach them at one address: managed memory (pages move to whichever side
// touches them; the GPU keeps the weights after the first window), or with
// Options.Pinned page-locked host memory. The host reads and writes them
// between windows, and at host points while the GPU runs other buffers.
type Memory struct {
	buffers.Table
	b      *Backend
	ptrs   []uintptr // device addresses
	pinned bool
}

var _ backend.Memory = (*Memory)(nil)

// hostSlice is n bytes at address p, which the driver gave and Go's
// collector does not manage.
func hostSlice(p uintptr, n int64) []byte {
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n)
}

func (b *Backend) newMemory(graphs ...*graph.Graph) (*Memory, error) {
	m := &Memory{Table: buffers.Table{Index: map[string]int{}}, b: b, pinned: b.opt.Pinned}
	var sizes []int64
	for _, g := range graphs {
		for _, buf := range g.Buffers {
			i, ok := m.Index[buf.Name]
			if !ok {
				m.Index[buf.Name] = len(m.Names)
				m.Names = append(m.Names, buf.Name)
				m.Kinds = append(m.Kinds, buf.Kind)
				sizes = append(sizes, buf.Size)
				continue
			}
			if m.Kinds[i] != buf.Kind {
				return nil, fmt.Errorf("cuda: buffer %s is %s in one graph and %s in another", buf.Name, m.Kinds[i], buf.Kind)
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
		for i, name := range m.Names {
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
				m.Bufs = append(m.Bufs, unsafe.Slice((*byte)(host), size)[:sizes[i]])
				clear(m.Bufs[i])
			} else {
				if err := d.check("cuMemAllocManaged", d.memAllocManaged(&p, uintptr(size), memAttachGlobal)); err != nil {
					return fmt.Errorf("buffer %s of %d bytes: %w", name, size, err)
				}
				if err := d.check("cuMemsetD8Async", d.memsetD8Async(p, 0, uintptr(size), 0)); err != nil {
					return err
				}
				m.Bufs = append(m.Bufs, hostSlice(p, size)[:sizes[i]])
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

// ptr is the device address of a binding.
func (m *Memory) ptr(buffer string, offset int64) (uintptr, error) {
	i, ok := m.Index[buffer]
	if !ok {
		return 0, fmt.Errorf("no buffer %q", buffer)
	}
	if offset < 0 || offset > int64(len(m.Bufs[i])) {
		return 0, fmt.Errorf("offset %d outside buffer %s of %d bytes", offset, buffer, len(m.Bufs[i]))
	}
	return m.ptrs[i] + uintptr(offset), nil
}

func (m *Memory) release() error {
	if m.ptrs == nil {
		return nil
	}
	ptrs, bufs := m.ptrs, m.Bufs
	m.ptrs, m.Bufs, m.Index = nil, nil, map[string]int{}
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
