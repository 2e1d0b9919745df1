package cpu

import (
	"sync"
	"sync/atomic"
	"testing"
)

// TestParallelCoversEveryItemOnce: at every thread count, from concurrent
// callers (the Concurrent order runs dispatches side by side), every index
// is visited exactly once and the chunks are contiguous.
func TestParallelCoversEveryItemOnce(t *testing.T) {
	defer SetThreads(0)
	for _, th := range []int{1, 2, 3, 8} {
		SetThreads(th)
		var wg sync.WaitGroup
		for caller := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for _, n := range []int{1, 2, 7, 100, 2049} {
					seen := make([]atomic.Int32, n)
					var chunks atomic.Int32
					parallel(n, 1<<15, func(lo, hi int) {
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
					if want := int32(min(th, n)); n > 1 && chunks.Load() != want {
						t.Errorf("threads %d n %d: %d chunks, want %d", th, n, chunks.Load(), want)
					}
				}
			}()
		}
		wg.Wait()
	}
	if SetThreads(0); Threads() < 1 {
		t.Errorf("SetThreads(0) left %d threads", Threads())
	}
}
