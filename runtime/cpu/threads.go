package cpu

import "runtime"

// SetThreads sets how many goroutines a kernel splits its work into, for
// every program of the process (the model config's runtime.threads, or
// strata's --threads); n ≤ 0 means one per core (GOMAXPROCS). Call it
// before running windows, not while they run.
func SetThreads(n int) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	workers = n
}

// Threads is the number SetThreads set.
func Threads() int { return workers }
