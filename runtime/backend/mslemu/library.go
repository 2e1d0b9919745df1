package mslemu

import (
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
)

// Limits of one dispatch (the C struct strata_emu_dispatch).
const (
	maxSlots  = 32
	maxConsts = 64
	maxTGMem  = 16
	errBytes  = 2048
	abi       = 1
)

// cDispatch is struct strata_emu_dispatch of emu/runtime.cpp, field for field.
type cDispatch struct {
	Kernel     int32
	NConst     int32
	Grid       [3]uint32
	TG         [3]uint32
	NTGMem     int32
	Flags      uint32
	Bufs       [maxSlots]uint64
	ConstIndex [maxConsts]int32
	ConstValue [maxConsts]uint32
	TGMem      [maxTGMem][2]uint64
	Err        [errBytes]byte
}

func (d *cDispatch) err() string {
	n := 0
	for n < len(d.Err) && d.Err[n] != 0 {
		n++
	}
	return string(d.Err[:n])
}

// library is a loaded emulator library. Its kernels' function constants and
// threadgroup memory are globals, so it runs one dispatch at a time.
type library struct {
	path     string
	mu       sync.Mutex
	dispatch func(*cDispatch) int32
}

var (
	loadedMu sync.Mutex
	loaded   = map[string]*library{}
)

// load opens a built library once per process (dlopen would hand back the
// same globals anyway).
func load(b *built) (*library, error) {
	loadedMu.Lock()
	defer loadedMu.Unlock()
	if l, ok := loaded[b.path]; ok {
		return l, nil
	}
	h, err := purego.Dlopen(b.path, purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return nil, fmt.Errorf("mslemu: loading %s: %w", b.path, err)
	}
	l := &library{path: b.path}
	var version func() int32
	purego.RegisterLibFunc(&version, h, "strata_emu_abi")
	if v := version(); v != abi {
		return nil, fmt.Errorf("mslemu: %s has dispatch layout %d, this build expects %d", b.path, v, abi)
	}
	purego.RegisterLibFunc(&l.dispatch, h, "strata_emu_dispatch")
	loaded[b.path] = l
	return l, nil
}
