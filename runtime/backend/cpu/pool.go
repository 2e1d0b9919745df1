package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// The kernels split their work by output rows over a pool of persistent
// workers, so no goroutine is started per dispatch. Each backend (New) has
// its own pool and thread count, so two models in one process can run with
// different counts; a pool's workers stop once its backend and every
// program compiled by it are unreachable.
//
// A dispatch cuts [0, n) into partsPerThread parts per thread at fixed
// boundaries and hands the job to the workers; every thread, the caller
// included, takes parts from one counter until none is left, and the caller
// returns once every part is done. So a worker that wakes late costs only
// the parts it did not take (the others take them), and a worker that wakes
// after the last part was taken takes none; which thread runs a part never
// changes what it computes. Between dispatches a worker spins on its queue
// for spinFor before it parks, and the caller spins for the parts still
// running before it sleeps: a decode token is ~60 dispatches a few tens of
// µs apart, and a parked thread takes tens of µs to wake.

const (
	partsPerThread = 4
	spinFor        = 100 * time.Microsecond
	// queueDepth bounds the jobs queued for one worker: a worker still
	// asleep when its job was finished by others holds it until it wakes,
	// and concurrent dispatches (the Concurrent order) queue one each.
	queueDepth = 64
)

// pool is one backend's workers and how many threads its kernels use.
type pool struct {
	threads int // ≥ 1
	w       *workers
}

// workers are a pool's running goroutines, one queue each. They are apart
// from the pool so that the cleanup that stops them does not keep the pool
// reachable.
type workers struct {
	mu    sync.Mutex
	chans []chan *job
}

// job is one parallel call: body over parts of [0, n).
type job struct {
	body     func(lo, hi int)
	n, parts int
	next     atomic.Int64 // the next part to take
	left     atomic.Int64 // parts not yet done
	mu       sync.Mutex
	finished *sync.Cond // signalled when left reaches 0 (caller asleep)
	sleeping bool
}

// work takes parts until none is left.
func (j *job) work() {
	for {
		i := int(j.next.Add(1) - 1)
		if i >= j.parts {
			return
		}
		j.body(j.n*i/j.parts, j.n*(i+1)/j.parts)
		if j.left.Add(-1) == 0 {
			j.mu.Lock()
			if j.sleeping {
				j.finished.Signal()
			}
			j.mu.Unlock()
		}
	}
}

// wait returns once every part is done: spinning first, then asleep.
func (j *job) wait() {
	for start, i := time.Now(), 0; j.left.Load() > 0; i++ {
		if i%64 == 63 && time.Since(start) > spinFor {
			j.mu.Lock()
			j.sleeping = true
			for j.left.Load() > 0 {
				j.finished.Wait()
			}
			j.mu.Unlock()
			return
		}
	}
}

// newPool is a pool of threads threads (0: one per core, GOMAXPROCS).
func newPool(threads int) *pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &pool{threads: threads, w: &workers{}}
	runtime.AddCleanup(p, (*workers).stop, p.w)
	return p
}

// get returns at least n−1 running workers.
func (w *workers) get(n int) []chan *job {
	w.mu.Lock()
	defer w.mu.Unlock()
	for len(w.chans) < n-1 {
		c := make(chan *job, queueDepth)
		go worker(c)
		w.chans = append(w.chans, c)
	}
	return w.chans[:n-1]
}

// worker runs the jobs of its queue until it is closed, spinning on it for
// spinFor after each job before it parks.
func worker(c chan *job) {
	for {
		var j *job
		select {
		case j = <-c:
		default:
			j = spin(c)
		}
		if j == nil {
			return // closed
		}
		j.work()
	}
}

// spin polls c for spinFor, then waits on it; nil once c is closed.
func spin(c chan *job) *job {
	for start, i := time.Now(), 0; ; i++ {
		select {
		case j, ok := <-c:
			if !ok {
				return nil
			}
			return j
		default:
		}
		if i%64 == 63 {
			if time.Since(start) > spinFor {
				j, ok := <-c
				if !ok {
					return nil
				}
				return j
			}
			runtime.Gosched() // a goroutine waiting for this P (a reader back from a syscall) runs
		}
	}
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

// parallel runs body over [0, n) in contiguous parts, over the pool's
// threads, when the work (n × cost per item) is large enough to pay for the
// handoff.
func (p *pool) parallel(n, cost int, body func(lo, hi int)) {
	w := p.threads
	if n*cost < 1<<15 || w < 2 || n < 2 {
		body(0, n)
		return
	}
	w = min(w, n)
	j := &job{body: body, n: n, parts: min(n, w*partsPerThread)}
	j.left.Store(int64(j.parts))
	j.finished = sync.NewCond(&j.mu)
	for _, c := range p.w.get(w) {
		c <- j
	}
	j.work()
	j.wait()
}
