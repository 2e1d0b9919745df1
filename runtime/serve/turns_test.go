package serve

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// TestTurnsOrder: the turn goes round robin in arrival order, a job whose
// next window makes its first token going before the others (behind the
// other such jobs), and a yield with nobody waiting keeps the turn.
func TestTurnsOrder(t *testing.T) {
	var tr turns
	var mu sync.Mutex
	var order []string
	ran := func(name string) {
		mu.Lock()
		order = append(order, name)
		mu.Unlock()
	}
	waiting := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			tr.mu.Lock()
			k := len(tr.waiting)
			tr.mu.Unlock()
			if k == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d waiting, want %d", k, n)
			}
		}
	}
	tr.acquire(false)
	tr.yield(false) // nobody waits: no wait
	var wg sync.WaitGroup
	start := func(name string, first bool) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr.acquire(first)
			ran(name)
			tr.release()
		}()
	}
	start("b", false)
	waiting(1)
	start("c", false)
	waiting(2)
	start("d", true)
	waiting(3)
	start("e", true)
	waiting(4)
	tr.yield(false) // a: behind every waiting job
	ran("a")
	tr.release()
	wg.Wait()
	if want := []string{"d", "e", "b", "c", "a"}; !slices.Equal(order, want) {
		t.Fatalf("turns ran in the order %v, want %v", order, want)
	}
	if tr.held || len(tr.waiting) > 0 {
		t.Fatalf("after every release the turn is held %v, %d waiting", tr.held, len(tr.waiting))
	}
}
