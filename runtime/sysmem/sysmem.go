// Package sysmem says how much memory this machine can give a model: the
// bound every size a user picks (--context, --arena-experts, --arena-gb) is
// checked against, and what the default expert arena is sized from. On
// Linux that is the tightest of MemAvailable, the process's cgroup limits
// (v2 and v1, every ancestor) and RLIMIT_AS.
package sysmem

import (
	"errors"
	"fmt"
)

// Info is the memory this process may have, in bytes.
type Info struct {
	Total     uint64 // physical memory, or the tightest limit when lower
	Available uint64 // what a new allocation can take without swapping out others or being killed
	Source    string // which bound Available comes from, for messages
}

// ErrUnknown is returned where the platform's memory cannot be read.
var ErrUnknown = errors.New("sysmem: this platform's available memory is unknown")

// Read reads the machine's memory now.
func Read() (Info, error) {
	i, err := read()
	if err != nil {
		return Info{}, fmt.Errorf("sysmem: %w", err)
	}
	return i, nil
}

// Size renders bytes for messages: in GB (decimal), or MB and kB below a GB.
func Size(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f kB", float64(n)/1e3)
}
