//go:build linux || darwin

package safetensors

import (
	"os"
	"syscall"
)

// mapFile maps f read-only. A checkpoint can be far larger than memory, so we
// let the kernel page it in on demand instead of reading it.
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
