package cpu

import (
	"runtime"
	"sync"
)

// The kernels split their work by output rows over a pool of persistent
// workers: a dispatch hands each worker one contiguous chunk through its
// channel and runs the first chunk itself, so no goroutine is started per
// dispatch. Each backend (New) has its own pool and thread count, so two
// models in one process can run with different counts; a pool's workers
// stop once its backend and every program compiled by it are unreachable.

// pool is one backend's workers and how many chunks its kernels split
// their work into.
type pool struct {
	threads int // ≥ 1
	w       *workers
}

// workers are a pool's running goroutines, one channel each. They are
// apart from the pool so that the cleanup that stops them does not keep
// the pool reachable.
type workers struct {
	mu    sync.Mutex
	chans []chan chunk
}

type chunk struct {
	body   func(lo, hi int)
	lo, hi int
	wg     *sync.WaitGroup
}

// newPool is a pool of threads chunks (0: one per core, GOMAXPROCS).
func newPool(threads int) *pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &pool{threads: threads, w: &workers{}}
	runtime.AddCleanup(p, (*workers).stop, p.w)
	return p
}

// get returns at least n−1 running workers.
func (w *workers) get(n int) []chan chunk {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.chans) < n-1 {
		c := make(chan chunk, 1)
		go func() {
			for ch := range c {
				ch.body(ch.lo, ch.hi)
				ch.wg.Done()
			}
		}()
		w.chans = append(w.chans, c)
	}
	return w.chans[:n-1]
}

// stop ends the workers (the pool is garbage: nothing sends any more).
func (w *workers) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.chans {
		close(c)
	}
	w.chans = nil
}

// running is how many workers are up.
func (w *workers) running() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.chans)
}

// parallel runs body over [0, n) in contiguous chunks, one per thread, when
// the work (n × cost per item) is large enough to pay for the handoff.
func (p *pool) parallel(n, cost int, body func(lo, hi int)) {
	w := p.threads
	if n*cost < 1<<15 || w < 2 || n < 2 {
		body(0, n)
		return
	}
	w = min(w, n)
	var wg sync.WaitGroup
	wg.Add(w - 1)
	for k, c := range p.w.get(w) {
		c <- chunk{body: body, lo: n * (k + 1) / w, hi: n * (k + 2) / w, wg: &wg}
	}
	body(0, n/w)
	wg.Wait()
}
