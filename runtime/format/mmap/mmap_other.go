//go:build !(linux || darwin)

// Package mmap maps model files read-only; here, without mmap, it reads them
// whole: correct, just not lazy.
package mmap

import (
	"io"
	"os"
)

// Map reads the first size bytes of f.
func Map(f *os.File, size int) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

// Unmap does nothing: the bytes are ordinary memory.
func Unmap([]byte) error { return nil }
