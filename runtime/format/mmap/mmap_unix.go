//go:build linux || darwin

// Package mmap maps model files read-only. Checkpoints, GGUF files and packs
// can be far larger than memory, so the kernel pages them in on demand
// instead of us reading them.
package mmap

import (
	"os"
	"syscall"
)

// Map maps the first size bytes of f read-only. A zero size maps nothing
// (mmap refuses length 0; the callers' header checks report empty files).
func Map(f *os.File, size int) ([]byte, error) {
	if size == 0 {
		return nil, nil
	}
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
}

// Unmap releases a mapping from Map.
func Unmap(b []byte) error {
	if b == nil {
		return nil
	}
	return syscall.Munmap(b)
}
