//go:build unix

package outfile

import (
	"os"
	"syscall"
)

// lock takes an exclusive advisory lock on f, held until f is closed or the
// process dies (however it dies).
func lock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }

// tryLock reports whether f could be locked: no live writer holds it.
func tryLock(f *os.File) bool { return lock(f) == nil }
