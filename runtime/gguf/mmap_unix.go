//go:build linux || darwin

package gguf

import (
	"os"
	"syscall"
)

// mapFile maps f read-only. A GGUF file can be far larger than memory (the
// experts alone), so the kernel pages it in on demand instead of us reading it.
func mapFile(f *os.File, size int) ([]byte, error) {
	if size == 0 {
		return nil, nil // mmap refuses length 0; the header check reports it
	}
	return syscall.Mmap(int(f.Fd()), 0, size, syscall.PROT_READ, syscall.MAP_SHARED)
}

func unmapFile(b []byte) error {
	if b == nil {
		return nil
	}
	return syscall.Munmap(b)
}
