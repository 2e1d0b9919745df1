package serve

import "sync"

// turns grants the model to one job at a time. A job holds the turn while
// it prepares its lane's session and runs a window, and hands it on between
// windows (engine.GenerateOptions.Turn) to the jobs waiting, round robin in
// arrival order, except that a job whose next window ends its prompt (its
// first token comes from it) goes before the others: a short request's
// first token waits for one window of each running job, not behind a long
// prefill's windows.
type turns struct {
	mu      sync.Mutex
	held    bool
	waiting []*waiter
}

type waiter struct {
	ready chan struct{}
	first bool // its next window makes its first token
}

// acquire waits for the turn.
func (t *turns) acquire(first bool) {
	t.mu.Lock()
	if !t.held {
		t.held = true
		t.mu.Unlock()
		return
	}
	w := t.enqueue(first)
	t.mu.Unlock()
	<-w.ready
}

// release hands the turn to the next waiting job, if any.
func (t *turns) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.waiting) == 0 {
		t.held = false
		return
	}
	t.handOn()
}

// yield lets the jobs waiting go first, then takes the turn back; with
// none waiting it returns at once.
func (t *turns) yield(first bool) {
	t.mu.Lock()
	if len(t.waiting) == 0 {
		t.mu.Unlock()
		return
	}
	w := t.enqueue(first)
	t.handOn()
	t.mu.Unlock()
	<-w.ready
}

// enqueue adds a waiter: behind every other, or with first behind only
// the other first ones.
func (t *turns) enqueue(first bool) *waiter {
	w := &waiter{ready: make(chan struct{}), first: first}
	at := len(t.waiting)
	if first {
		at = 0
		for at < len(t.waiting) && t.waiting[at].first {
			at++
		}
	}
	t.waiting = append(t.waiting, nil)
	copy(t.waiting[at+1:], t.waiting[at:])
	t.waiting[at] = w
	return w
}

// handOn gives the turn to the first waiter (the turn stays held).
func (t *turns) handOn() {
	w := t.waiting[0]
	t.waiting = t.waiting[1:]
	close(w.ready)
}
