package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestParallelCoversEveryItemOnce: at every thread count, from concurrent
// callers (the Concurrent order runs dispatches side by side), every index
// is visited exactly once, in partsPerThread contiguous parts per thread at
// the same boundaries every time.
func TestParallelCoversEveryItemOnce(t *testing.T) {
	for _, th := range []int{1, 2, 3, 8} {
		p := newPool(th)
		var wg sync.WaitGroup
		for caller := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, n := range []int{1, 2, 7, 100, 2049} {
					seen := make([]atomic.Int32, n)
					var chunks atomic.Int32
					p.parallel(n, 1<<15, func(lo, hi int) {
						chunks.Add(1)
						for i := lo; i < hi; i++ {
							seen[i].Add(1)
						}
					})
					for i := range seen {
						if c := seen[i].Load(); c != 1 {
							t.Errorf("threads %d caller %d n %d: index %d visited %d times", th, caller, n, i, c)
							return
						}
					}
					if want := int32(min(th*partsPerThread, n)); n > 1 && th > 1 && chunks.Load() != want {
						t.Errorf("threads %d n %d: %d chunks, want %d", th, n, chunks.Load(), want)
					}
				}
			}()
		}
		wg.Wait()
	}
	if n := New(0).Threads(); n != runtime.GOMAXPROCS(0) {
		t.Errorf("New(0) has %d threads, want one per core (%d)", n, runtime.GOMAXPROCS(0))
	}
}

// Each backend has its own thread count: a kernel of one splits its work
// into that many chunks whatever another backend was made with, and the
// workers of a backend nothing references any more stop.
func TestThreadsPerBackend(t *testing.T) {
	three, five := New(3), New(5)
	for _, b := range []*Host{three, five, three} {
		var chunks atomic.Int32
		b.pool.parallel(100, 1<<15, func(lo, hi int) { chunks.Add(1) })
		if int(chunks.Load()) != b.Threads()*partsPerThread {
			t.Errorf("a backend of %d threads split the work into %d chunks", b.Threads(), chunks.Load())
		}
	}
	w := five.pool.w
	if w.running() != 4 {
		t.Fatalf("%d workers running for 5 threads, want 4", w.running())
	}
	five = nil
	for deadline := time.Now().Add(5 * time.Second); w.running() > 0 && time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if n := w.running(); n != 0 {
		t.Errorf("%d workers still running after their backend was dropped", n)
	}
	runtime.KeepAlive(three)
}

// BenchmarkParallelHandoff is the cost of one parallel call whose work is
// nothing: the hand-off to the workers and back, which a decode window pays
// per dispatch.
func BenchmarkParallelHandoff(b *testing.B) {
	p := newPool(2)
	var sink [2]int
	for b.Loop() {
		p.parallel(2, 1<<15, func(lo, hi int) { sink[lo]++ })
	}
}

// BenchmarkParallelAfterGap is a parallel call after 50 µs of serial work,
// as a decode window's matmul follows its norm: what a worker that parked
// between dispatches would cost to wake.
func BenchmarkParallelAfterGap(b *testing.B) {
	p := newPool(2)
	var sink [8]int
	for b.Loop() {
		for t := time.Now(); time.Since(t) < 50*time.Microsecond; {
		}
		p.parallel(8, 1<<15, func(lo, hi int) { sink[lo]++ })
	}
}
