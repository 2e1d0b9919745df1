package sysmem

import "golang.org/x/sys/unix"

// read takes MemAvailable, tightened by the process's cgroup limits and
// RLIMIT_AS.
func read() (Info, error) {
	var as uint64
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_AS, &r); err == nil && r.Cur != unix.RLIM_INFINITY {
		as = r.Cur
	}
	return readBounds("/", as)
}
