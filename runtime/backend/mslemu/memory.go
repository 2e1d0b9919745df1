package mslemu

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Memory holds a model's named buffers in mapped memory (never moved or
// freed by Go's collector, so the kernels may keep addresses into it), laid
// out, sized and zeroed as backend.NewHostMemory does for the cpu backend. With a
// sanitizer, each buffer is a memfd the child process maps too.
type Memory struct {
	*backend.HostMemory
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
	layout, err := backend.Layout(graphs...)
	if err != nil {
		return nil, err
	}
	h := &held{}
	host := make([][]byte, len(layout))
	for i, b := range layout {
		if b.Kind == graph.KindMapped {
			h.maps, h.files = append(h.maps, nil), append(h.files, nil)
			continue // never wrapped: the emulator is no in-place backend
		}
		mapping, buf, f, err := allocate(b.Name, b.Size, int64(backend.Align(b.Kind)), shared)
		if err != nil {
			h.release()
			return nil, fmt.Errorf("mslemu: buffer %s of %d bytes: %w", b.Name, b.Size, err)
		}
		h.maps = append(h.maps, mapping)
		h.files = append(h.files, f)
		host[i] = buf
	}
	mem, err := backend.WrapHostMemory(layout, host)
	if err != nil {
		h.release()
		return nil, fmt.Errorf("mslemu: %w", err)
	}
	m := &Memory{HostMemory: mem, held: h}
	runtime.AddCleanup(m, func(h *held) { h.release() }, m.held)
	return m, nil
}

// Wrap refuses: the emulator allocates every buffer itself, since with a
// sanitizer the child process maps them from memfds.
func (m *Memory) Wrap(name string, _ []byte) error {
	return fmt.Errorf("mslemu: buffer %s: the emulator does not use weights in place", name)
}

// Close stops the sanitizer process and unmaps the buffers; the Memory must
// not be used after.
func (m *Memory) Close() error {
	m.Drop()
	return m.release()
}

// aligned is the n bytes of mapping starting at its first multiple of align.
func aligned(mapping []byte, n, align int64) []byte {
	skip := int64(-uintptr(unsafe.Pointer(&mapping[0]))) & (align - 1)
	return mapping[skip : skip+n : skip+n]
}
