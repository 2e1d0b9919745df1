//go:build !linux

package mslemu

import (
	"errors"
	"os"
)

// allocate is Linux-only, as is the rest of the emulator (build refuses
// other systems first).
func allocate(name string, n, align int64, shared bool) (mapping, buf []byte, f *os.File, err error) {
	return nil, nil, nil, errors.New("mslemu runs on Linux")
}

func unmap(b []byte) error { return nil }
