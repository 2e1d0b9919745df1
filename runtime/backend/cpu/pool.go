package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// The kernels split their work by output rows over a pool of persistent
// workers: a dispatch hands each worker one contiguous chunk through its
// channel and runs the first chunk itself, so no goroutine is started per
// dispatch. The pool is process-wide (the cores are).

// threads is how many chunks a kernel splits its work into (≥ 1).
var threads atomic.Int32

func init() { threads.Store(int32(runtime.GOMAXPROCS(0))) }

// SetThreads sets how many threads the kernels use: n ≥ 1, or 0 for one
// per core (GOMAXPROCS). It is what the runtime.threads config field sets;
// the kernels in flight finish with the old count.
func SetThreads(n int) {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	threads.Store(int32(n))
}

// Threads is the current thread count.
func Threads() int { return int(threads.Load()) }

type chunk struct {
	body   func(lo, hi int)
	lo, hi int
	wg     *sync.WaitGroup
}

var pool struct {
	mu      sync.Mutex
	workers []chan chunk
}

// workersFor returns at least n−1 running workers.
func workersFor(n int) []chan chunk {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	for len(pool.workers) < n-1 {
		c := make(chan chunk, 1)
		go func() {
			for ch := range c {
				ch.body(ch.lo, ch.hi)
				ch.wg.Done()
			}
		}()
		pool.workers = append(pool.workers, c)
	}
	return pool.workers[:n-1]
}

// parallel runs body over [0, n) in contiguous chunks, one per thread, when
// the work (n × cost per item) is large enough to pay for the handoff.
func parallel(n, cost int, body func(lo, hi int)) {
	w := Threads()
	if n*cost < 1<<15 || w < 2 || n < 2 {
		body(0, n)
		return
	}
	w = min(w, n)
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for k, c := range workersFor(w) {
		c <- chunk{body: body, lo: n * (k + 1) / w, hi: n * (k + 2) / w, wg: &wg}
	}
	body(0, n/w)
	wg.Wait()
}
