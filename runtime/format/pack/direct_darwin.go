package pack

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// directAlign: F_NOCACHE takes reads of any alignment (aligned ones avoid a
// partial-page copy, and arena slots are aligned anyway).
const directAlign = 1

// openDirect opens a descriptor with F_NOCACHE and read-ahead off: the
// reader threads ask for exactly the experts they need, and the unified
// buffer cache would otherwise keep a second copy of every expert. fcntl goes
// through x/sys/unix because darwin's syscall.Syscall takes a libSystem
// trampoline, not a syscall number.
func openDirect(path string) (*os.File, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("opening for F_NOCACHE: %w", err)
	}
	c, err := f.SyscallConn()
	if err == nil {
		cerr := c.Control(func(fd uintptr) {
			if _, err = unix.FcntlInt(fd, unix.F_NOCACHE, 1); err != nil {
				err = fmt.Errorf("fcntl F_NOCACHE: %w", err)
				return
			}
			if _, err = unix.FcntlInt(fd, unix.F_RDAHEAD, 0); err != nil {
				err = fmt.Errorf("fcntl F_RDAHEAD: %w", err)
			}
		})
		if err == nil {
			err = cerr
		}
	}
	if err != nil {
		f.Close()
		return nil, "", err
	}
	return f, "F_NOCACHE", nil
}

func fsNote(string) string { return "" }
