package mslemu

import (
	"fmt"
	"runtime"
	"slices"
	"unsafe"

	"github.com/strata-llm/strata/artifact"
)

// Launch is one dispatch as a GPU command encoder states it, with no window
// graph behind it: a kernel of the model, its function constants by index,
// and host memory at each argument slot. It lets the emulator stand in for
// the GPU under another encoder (the Metal backend's, through its Recorder).
type Launch struct {
	Kernel    string
	Constants map[int]int64 // function-constant index → value
	// Slots holds each buffer argument from its binding offset on, and the
	// argument struct (setBytes data) at its slot.
	Slots             map[int][]byte
	Grid, Threadgroup [3]int
}

// Launch runs one dispatch in process (not under a sanitizer). It holds the
// launch to what Metal would: every constant the kernel reads set (or
// optional) and no other, values that fit their types, every buffer
// argument and the argument struct bound, the threadgroup within 1024
// threads. It cannot tell how far a kernel reads past a binding: the caller
// owns the memory.
func (e *Emulator) Launch(l Launch) error {
	if e.lib == nil {
		return fmt.Errorf("mslemu: launches run in process only, not under the %s sanitizer", e.opt.Sanitize)
	}
	ki, ok := e.kernels[l.Kernel]
	if !ok {
		return fmt.Errorf("mslemu: kernels.metal of %s has no kernel %s", e.model.Name, l.Kernel)
	}
	k := &e.model.Kernels[ki]
	var c cDispatch
	c.Kernel = int32(ki)
	byIndex := map[int]artifact.FunctionConstant{}
	for _, fc := range e.model.Constants {
		byIndex[fc.Index] = fc
	}
	for idx := range l.Constants {
		if !slices.Contains(k.Constants, idx) {
			return fmt.Errorf("mslemu: kernel %s reads no function constant at index %d", k.Name, idx)
		}
	}
	for _, idx := range k.Constants {
		fc := byIndex[idx]
		v, given := l.Constants[idx]
		if !given {
			if !fc.Optional {
				return fmt.Errorf("mslemu: kernel %s: required function constant %s (%d) is not set", k.Name, fc.Name, idx)
			}
			continue
		}
		if v < 0 || v > 1<<32-1 || fc.Type == artifact.Bool && v > 1 {
			return fmt.Errorf("mslemu: function constant %s = %d does not fit a %s", fc.Name, v, fc.Type)
		}
		if c.NConst == maxConsts {
			return fmt.Errorf("mslemu: kernel %s reads more than %d function constants", k.Name, maxConsts)
		}
		c.ConstIndex[c.NConst], c.ConstValue[c.NConst] = int32(idx), uint32(v)
		c.NConst++
	}
	for _, b := range k.Buffers {
		mem, ok := l.Slots[b.Slot]
		if !ok {
			return fmt.Errorf("mslemu: kernel %s: nothing bound at slot %d (%s)", k.Name, b.Slot, b.Name)
		}
		if len(mem) > 0 {
			c.Bufs[b.Slot] = uint64(uintptr(unsafe.Pointer(unsafe.SliceData(mem))))
		}
	}
	var args []uint64 // a 16-byte aligned copy of the argument struct
	if k.ArgsSlot >= 0 {
		data, ok := l.Slots[k.ArgsSlot]
		if !ok || len(data) < k.ArgsSize {
			return fmt.Errorf("mslemu: kernel %s: argument struct of %d bytes at slot %d, %d bound", k.Name, k.ArgsSize, k.ArgsSlot, len(data))
		}
		args = make([]uint64, (k.ArgsSize+7)/8+2)
		base := uintptr(unsafe.Pointer(&args[0]))
		aligned := unsafe.Slice((*byte)(unsafe.Pointer(&args[0])), len(args)*8)[-base&15:]
		copy(aligned, data[:k.ArgsSize])
		c.Bufs[k.ArgsSlot] = uint64(uintptr(unsafe.Pointer(&aligned[0])))
	}
	threads := 1
	for a := 0; a < 3; a++ {
		if l.Grid[a] < 1 || l.Threadgroup[a] < 1 || l.Grid[a] > 1<<31 {
			return fmt.Errorf("mslemu: kernel %s: grid %v of threadgroups %v", k.Name, l.Grid, l.Threadgroup)
		}
		c.Grid[a], c.TG[a] = uint32(l.Grid[a]), uint32(l.Threadgroup[a])
		threads *= l.Threadgroup[a]
	}
	if threads > 1024 {
		return fmt.Errorf("mslemu: kernel %s: threadgroup %v of %d threads, more than 1024", k.Name, l.Threadgroup, threads)
	}
	c.NTGMem = int32(copy(c.TGMem[:], e.built.tgmem[ki]))
	e.lib.mu.Lock()
	defer e.lib.mu.Unlock()
	if e.lib.dispatch(&c) != 0 {
		return fmt.Errorf("mslemu: kernel %s: %s", k.Name, c.err())
	}
	runtime.KeepAlive(args)
	runtime.KeepAlive(l.Slots)
	return nil
}
