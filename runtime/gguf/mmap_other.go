//go:build !(linux || darwin)

package gguf

import (
	"io"
	"os"
)

// mapFile reads the whole file where we do not use mmap; correct, just not lazy.
func mapFile(f *os.File, size int) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

func unmapFile([]byte) error { return nil }
