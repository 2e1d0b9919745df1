package mslemu

import (
	"os"

	"golang.org/x/sys/unix"
)

// allocate maps n zeroed bytes aligned to align inside the mapping; shared
// ones live in a memfd a child process can map.
func allocate(name string, n, align int64, shared bool) (mapping, buf []byte, f *os.File, err error) {
	if n == 0 {
		return nil, []byte{}, nil, nil
	}
	size := int(n + align - 1)
	if !shared {
		mapping, err = unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_NORESERVE)
		if err != nil {
			return nil, nil, nil, err
		}
		return mapping, aligned(mapping, n, align), nil, nil
	}
	fd, err := unix.MemfdCreate("strata-"+name, unix.MFD_CLOEXEC)
	if err != nil {
		return nil, nil, nil, err
	}
	f = os.NewFile(uintptr(fd), "memfd:strata-"+name)
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	mapping, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		f.Close()
		return nil, nil, nil, err
	}
	return mapping, aligned(mapping, n, align), f, nil
}

func unmap(b []byte) error { return unix.Munmap(b) }
