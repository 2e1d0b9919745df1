package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Memory holds a model's named buffers. The two kinds the host touches
// every window live in device memory with a page-locked host mirror: the
// params (the host writes the mirror; each window's first operation copies
// the part of it that window reads to the device) and the scratch (the
// GPU's activations; a range the host asks for, the logits, is copied back
// into the mirror when asked). Every other buffer (weights, experts, state,
// caches, the residency map) is managed memory: one address for host and
// GPU, whose pages settle on the GPU after the first window because the
// host touches them only at load, at host points and for state copies.
// Options.Pinned puts every buffer in page-locked host memory instead.
// The host side is backend.HostMemory, laid out as for every backend;
// Memory adds the device addresses.
type Memory struct {
	*backend.HostMemory
	b      *Backend
	ptrs   []uintptr // device addresses of the buffers
	allocs []uintptr // what the driver allocated (the experts start a page inside)
	// mirror[i] is the page-locked host copy of a buffer that lives in
	// device memory (nil: the buffer is managed or pinned, one address).
	mirror []unsafe.Pointer
	pinned bool
}

// mirrored says whether a buffer of kind lives in device memory behind a
// host mirror: the params, the scratch and the carry, which the host writes
// or reads between windows (as managed memory their pages would move between
// host and GPU every window, which costs more than the kernels of a decode
// window).
func mirrored(kind string) bool {
	return kind == graph.KindParams || kind == graph.KindScratch || kind == graph.KindCarry
}

// deviceOwned says whether the device holds the current bytes of a mirrored
// buffer of kind (the GPU writes it; the host reads through a download and
// writes through Write), rather than the host (the params).
func deviceOwned(kind string) bool { return kind == graph.KindScratch || kind == graph.KindCarry }

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
			var mirror unsafe.Pointer
			if !m.pinned && mirrored(l.Kind) {
				if align > 256 { // checked before anything is allocated for it
					return fmt.Errorf("buffer %s: a %s buffer needs no %d-byte alignment", l.Name, l.Kind, align)
				}
				if err := d.check("cuMemAlloc", d.memAlloc(&p, uintptr(size))); err != nil {
					return fmt.Errorf("buffer %s of %d bytes: %w", l.Name, size, err)
				}
				if err := d.check("cuMemHostAlloc", d.memHostAlloc(&mirror, uintptr(size), hostAllocPortable)); err != nil {
					d.memFree(p)
					return fmt.Errorf("buffer %s of %d bytes: %w", l.Name, size, err)
				}
				if err := d.check("cuMemsetD8Async", d.memsetD8Async(p, 0, uintptr(size), 0)); err != nil {
					d.memFree(p)
					d.memFreeHost(mirror)
					return err
				}
				alloc, h = p, unsafe.Slice((*byte)(mirror), size)
				clear(h)
			} else if m.pinned {
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
			m.mirror = append(m.mirror, mirror)
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
	allocs, mirror := m.allocs, m.mirror
	m.ptrs, m.allocs, m.mirror = nil, nil, nil
	if m.HostMemory != nil {
		m.Drop()
	}
	var errs []error
	err := m.b.do(func() error {
		for i, p := range allocs {
			if i < len(mirror) && mirror[i] != nil {
				errs = append(errs, m.b.d.check("cuMemFree", m.b.d.memFree(p)), m.b.d.check("cuMemFreeHost", m.b.d.memFreeHost(mirror[i])))
			} else if m.pinned {
				errs = append(errs, m.b.d.check("cuMemFreeHost", m.b.d.memFreeHost(*(*unsafe.Pointer)(unsafe.Pointer(&p)))))
			} else {
				errs = append(errs, m.b.d.check("cuMemFree", m.b.d.memFree(p)))
			}
		}
		return nil
	})
	return errors.Join(append(errs, err)...)
}

// Bytes is the range r; a range of a buffer in device memory (the scratch:
// logits, the router's choices at a host point; the carry) is first copied
// into the mirror, so the host reads what the GPU wrote. A host write to it
// goes through Write.
func (m *Memory) Bytes(r graph.Range) ([]byte, error) {
	b, err := m.HostMemory.Bytes(r)
	if err != nil || len(b) == 0 {
		return b, err
	}
	i, _ := m.Index(r.Buffer)
	if m.mirror[i] == nil || !deviceOwned(m.Layout()[i].Kind) {
		return b, nil
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(m.mirror[i])
	return b, m.download(i, off, uintptr(len(b)))
}

// Buffer is a whole buffer; the scratch and the carry are copied back from
// the device first, as Bytes does.
func (m *Memory) Buffer(name string) []byte {
	b := m.HostMemory.Buffer(name)
	if i, ok := m.Index(name); ok && len(b) > 0 && m.mirror[i] != nil && deviceOwned(m.Layout()[i].Kind) {
		if err := m.download(i, 0, uintptr(len(b))); err != nil {
			panic(fmt.Sprintf("cuda: buffer %s: %v", name, err)) // the device is gone: nothing to read
		}
	}
	return b
}

// download copies n bytes at off of buffer i from the device into its
// mirror. It runs on the caller's own locked thread with the context made
// current there, not through Backend.do: at a host point the backend's
// thread is waiting on the window, which waits on this caller. The range
// was written by work the GPU finished before the caller asked (a finished
// window, or a host point's signal written after it), so no stream order is
// needed; the copy goes on the legacy stream, which the program's
// non-blocking streams never wait for.
func (m *Memory) download(i int, off, n uintptr) error {
	return m.copyOut(unsafe.Add(m.mirror[i], off), m.ptrs[i]+off, n)
}

// copyOut copies n device bytes at src to the host at dst, and copyIn n host
// bytes at src to the device at dst, with the copy engine on the caller's
// own thread (see download). Managed memory is copied where its pages are:
// the host never touches them, so pages that settled on the GPU stay there.
func (m *Memory) copyOut(dst unsafe.Pointer, src uintptr, n uintptr) error {
	return m.onCaller(func(d *driver) error { return d.check("cuMemcpyDtoH", d.memcpyDtoH(dst, src, n)) })
}

func (m *Memory) copyIn(dst uintptr, src unsafe.Pointer, n uintptr) error {
	return m.onCaller(func(d *driver) error { return d.check("cuMemcpyHtoD", d.memcpyHtoD(dst, src, n)) })
}

// onCaller runs f on the caller's locked thread with the context current.
func (m *Memory) onCaller(f func(d *driver) error) error {
	d := m.b.d
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := d.check("cuCtxSetCurrent", d.ctxSetCurrent(m.b.ctx)); err != nil {
		return err
	}
	return f(d)
}

// Write copies data to the start of range r: into the host's bytes and, for
// a buffer in device memory, on to the device, so the next window reads it
// (engine's MTP catch-up writes hidden rows into the carry this way).
func (m *Memory) Write(r graph.Range, data []byte) error {
	b, err := m.HostMemory.Bytes(r)
	if err != nil {
		return err
	}
	if len(data) > len(b) {
		return fmt.Errorf("cuda: writing %d bytes into range %s+%d of %d bytes", len(data), r.Buffer, r.Offset, len(b))
	}
	copy(b, data)
	i, _ := m.Index(r.Buffer)
	if len(data) == 0 || m.mirror[i] == nil {
		return nil
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(m.mirror[i])
	return m.copyIn(m.ptrs[i]+off, unsafe.Pointer(unsafe.SliceData(b)), uintptr(len(data)))
}

// Clear zeroes every buffer of a kind on the device (a memset), never
// through the host's view of managed pages.
func (m *Memory) Clear(kind string) {
	if m.pinned {
		m.HostMemory.Clear(kind)
		return
	}
	err := m.onCaller(func(d *driver) error {
		for i, l := range m.Layout() {
			if l.Kind != kind || len(m.Host(i)) == 0 {
				continue
			}
			if m.mirror[i] != nil {
				clear(m.Host(i))
			}
			if err := d.check("cuMemsetD8", d.memsetD8Async(m.ptrs[i], 0, uintptr(len(m.Host(i))), 0)); err != nil {
				return fmt.Errorf("buffer %s: %w", l.Name, err)
			}
		}
		return d.check("cuCtxSynchronize", d.ctxSynchronize())
	})
	if err != nil {
		panic(fmt.Sprintf("cuda: clearing %s buffers: %v", kind, err)) // the device is gone
	}
}

// Snapshot copies every buffer of a kind into dst (reused when large
// enough) with the copy engine: speculative decoding snapshots the state
// before every verify window, and a host memmove over managed pages would
// move each of them to the host and back (most of a small model's decode
// step on the GPU). Restore copies a snapshot back the same way.
func (m *Memory) Snapshot(kind string, dst map[string][]byte) map[string][]byte {
	if m.pinned {
		return m.HostMemory.Snapshot(kind, dst)
	}
	if dst == nil {
		dst = map[string][]byte{}
	}
	for i, l := range m.Layout() {
		if l.Kind != kind {
			continue
		}
		n := len(m.Host(i))
		b := dst[l.Name]
		if cap(b) < n {
			b = make([]byte, n)
		}
		b = b[:n]
		if n > 0 {
			if err := m.copyOut(unsafe.Pointer(unsafe.SliceData(b)), m.ptrs[i], uintptr(n)); err != nil {
				panic(fmt.Sprintf("cuda: snapshot of buffer %s: %v", l.Name, err)) // the device is gone
			}
			if m.mirror[i] != nil {
				copy(m.Host(i), b)
			}
		}
		dst[l.Name] = b
	}
	return dst
}

// Restore copies a snapshot back (see Snapshot).
func (m *Memory) Restore(snap map[string][]byte) {
	if m.pinned {
		m.HostMemory.Restore(snap)
		return
	}
	for name, b := range snap {
		i, ok := m.Index(name)
		if !ok || len(b) == 0 {
			continue
		}
		n := min(len(b), len(m.Host(i)))
		if m.mirror[i] != nil {
			copy(m.Host(i), b[:n])
		}
		if err := m.copyIn(m.ptrs[i], unsafe.Pointer(unsafe.SliceData(b)), uintptr(n)); err != nil {
			panic(fmt.Sprintf("cuda: restoring buffer %s: %v", name, err)) // the device is gone
		}
	}
}

// upload copies the first n bytes of buffer i's mirror to the device,
// synchronously (between windows).
func (m *Memory) upload(i int, n uintptr) error {
	return m.b.do(func() error {
		return m.b.d.check("cuMemcpyHtoD", m.b.d.memcpyHtoD(m.ptrs[i], m.mirror[i], n))
	})
}
