package stream

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Reader reads experts from the pack. ReadExpert fills dst with bytes
// [off, off+len(dst)) of expert (layer, expert)'s block; it is called from
// several goroutines at once.
type Reader interface {
	ReadExpert(layer, expert, off int, dst []byte) error
}

// Options tune the I/O pool.
type Options struct {
	Threads int // reader goroutines (default 8)
	Urgent  int // of them, reserved for urgent misses (default 2)
	// SplitBytes: a miss at least this large is read in parts by several
	// threads at once (default 256 KiB; 0 keeps the default, <0 never splits).
	SplitBytes int
	Retries    int // attempts after a failed read before giving up (default 2)
	// Verify, when set, checks an expert's bytes after a read; a failure
	// counts as a failed read, so nothing corrupt is ever published.
	Verify func(layer, expert int, data []byte) error
	// Trace records every expert a layer needed, in order (for judging the
	// cache policy against Belady's optimum on the same accesses).
	Trace bool
}

// Stats is the streamer's telemetry since it started.
type Stats struct {
	Hits, Misses     int           // experts found resident / read urgently when a layer needed them
	Late             int           // needed while their read-ahead was still in flight
	Prefetched, Used int           // read-aheads issued, and those a layer then needed
	BytesRead        int64         // bytes read from the pack
	Stall            time.Duration // time layers waited for experts
	// ReadTime is the time reader threads spent in reads, summed over
	// threads (BytesRead/ReadTime: the rate one thread sees); ReadBusy is
	// the wall time at least one read was in flight (BytesRead/ReadBusy: the
	// pool's rate while reading).
	ReadTime, ReadBusy time.Duration
	// HostPoints is how many times a window stopped for the host (a layer's
	// handshake: the GPU waits while the host reads the router's choices,
	// makes them resident and writes the smap), HostTime the host's time
	// at every host point (waited at or run past), Stall included. The
	// engine fills them (Model.StreamStats).
	HostPoints int
	HostTime   time.Duration
	// RanOn is how many host points the GPU passed without waiting: it
	// checked the routed experts against smap itself and found them all
	// resident (backend.CheckedProgram; the engine fills it too).
	RanOn int
	// Batches is how many times a layer's routed experts ran for the rows
	// of several windows at once (layer-major prefill on a backend that
	// batches them), BatchRows the rows they ran for: each expert then
	// meets all of its rows in one pass (the engine fills both).
	Batches, BatchRows int
}

// Add is s plus t: the telemetry of two stretches of work together.
func (s Stats) Add(t Stats) Stats {
	return Stats{Hits: s.Hits + t.Hits, Misses: s.Misses + t.Misses, Late: s.Late + t.Late,
		Prefetched: s.Prefetched + t.Prefetched, Used: s.Used + t.Used, BytesRead: s.BytesRead + t.BytesRead,
		Stall: s.Stall + t.Stall, ReadTime: s.ReadTime + t.ReadTime, ReadBusy: s.ReadBusy + t.ReadBusy,
		HostPoints: s.HostPoints + t.HostPoints, HostTime: s.HostTime + t.HostTime, RanOn: s.RanOn + t.RanOn,
		Batches: s.Batches + t.Batches, BatchRows: s.BatchRows + t.BatchRows}
}

// Sub is s less t: the telemetry of the work between two readings.
func (s Stats) Sub(t Stats) Stats {
	return Stats{Hits: s.Hits - t.Hits, Misses: s.Misses - t.Misses, Late: s.Late - t.Late,
		Prefetched: s.Prefetched - t.Prefetched, Used: s.Used - t.Used, BytesRead: s.BytesRead - t.BytesRead,
		Stall: s.Stall - t.Stall, ReadTime: s.ReadTime - t.ReadTime, ReadBusy: s.ReadBusy - t.ReadBusy,
		HostPoints: s.HostPoints - t.HostPoints, HostTime: s.HostTime - t.HostTime, RanOn: s.RanOn - t.RanOn,
		Batches: s.Batches - t.Batches, BatchRows: s.BatchRows - t.BatchRows}
}

// request is one expert read, possibly split into parts.
type request struct {
	key, slot int
	left      int // parts outstanding
	err       error
	done      chan struct{}
	urgent    bool
	parts     []part
}

type part struct {
	req      *request
	off, len int
	taken    *bool // set by the reader that takes it: a promoted part sits in both queues
}

// Streamer makes the experts each layer needs resident. Routing never
// depends on I/O timing: which experts are resident as far as routing can
// see (Visible) changes only at BeginWindow, after every read-ahead issued
// in the previous window has landed; evictions follow the LRU order of
// accesses, and reads in flight stay pinned until a deterministic point.
type Streamer struct {
	a   *Arena
	r   Reader
	opt Options
	mu  sync.Mutex
	// The read queues, guarded by mu: urgent parts (a layer waits on them)
	// before read-aheads. They are slices, not channels, so queueing under
	// mu never blocks: a 64-row prefill window of a 512-expert layer queues
	// 1,536 parts, and a full channel waited on with mu held would stop
	// the readers, who need mu to drain it.
	urg, bg []part
	work    *sync.Cond // a part was queued, or the pool closed
	closed  bool
	wg      sync.WaitGroup

	inflight map[int]*request
	limbo    map[int][]*request // read-aheads in flight, by the layer they are for
	layerPin []int              // slots the current layer uses
	visible  []bool
	usage    *Usage
	stats    Stats
	trace    []int
	reading  int       // reads in flight, for Stats.ReadBusy
	busy     time.Time // when reading last became nonzero
}

// NewStreamer starts the reader pool over arena a.
func NewStreamer(a *Arena, r Reader, opt Options) *Streamer {
	if opt.Threads <= 0 {
		opt.Threads = 8
	}
	if opt.Urgent <= 0 {
		opt.Urgent = min(2, opt.Threads)
	}
	// At least one reader must serve read-aheads.
	opt.Urgent = min(opt.Urgent, opt.Threads-1)
	if opt.SplitBytes == 0 {
		opt.SplitBytes = 256 << 10
	}
	if opt.Retries == 0 {
		opt.Retries = 2
	}
	s := &Streamer{a: a, r: r, opt: opt,
		inflight: map[int]*request{}, limbo: map[int][]*request{}, visible: make([]bool, a.Layers*a.Experts), usage: NewUsage(a.Layers, a.Experts)}
	s.work = sync.NewCond(&s.mu)
	for i := 0; i < opt.Threads; i++ {
		s.wg.Add(1)
		go s.reader(i < opt.Urgent)
	}
	return s
}

// Close stops the reader pool.
func (s *Streamer) Close() {
	s.mu.Lock()
	s.closed = true
	s.work.Broadcast()
	s.mu.Unlock()
	s.wg.Wait()
}

// reader serves the urgent queue first; reserved readers serve only it. It
// waits for work, never spins.
func (s *Streamer) reader(reserved bool) {
	defer s.wg.Done()
	s.mu.Lock()
	for {
		var p part
		switch {
		case len(s.urg) > 0:
			p, s.urg = s.urg[0], s.urg[1:]
		case !reserved && len(s.bg) > 0:
			p, s.bg = s.bg[0], s.bg[1:]
		case s.closed:
			s.mu.Unlock()
			return
		default:
			s.work.Wait()
			continue
		}
		s.mu.Unlock()
		s.read(p)
		s.mu.Lock()
	}
}

// enqueue queues a part for the readers; the caller holds mu.
func (s *Streamer) enqueue(p part, urgent bool) {
	if urgent {
		s.urg = append(s.urg, p)
	} else {
		s.bg = append(s.bg, p)
	}
	s.work.Broadcast()
}

func (s *Streamer) read(p part) {
	r := p.req
	layer, expert := r.key/s.a.Experts, r.key%s.a.Experts
	s.mu.Lock()
	if *p.taken {
		s.mu.Unlock()
		return
	}
	*p.taken = true
	dst := s.a.Bytes(layer, expert)[p.off : p.off+p.len]
	start := time.Now()
	if s.reading++; s.reading == 1 {
		s.busy = start
	}
	s.mu.Unlock()
	var err error
	for try := 0; try <= s.opt.Retries; try++ {
		if err = s.r.ReadExpert(layer, expert, p.off, dst); err == nil {
			break
		}
	}
	end := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.ReadTime += end.Sub(start)
	if s.reading--; s.reading == 0 {
		s.stats.ReadBusy += end.Sub(s.busy)
	}
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("reading expert %d of layer %d (bytes %d–%d): %w", expert, layer, p.off, p.off+p.len, err)
	}
	s.stats.BytesRead += int64(p.len)
	if r.left--; r.left > 0 {
		return
	}
	if r.err == nil && s.opt.Verify != nil {
		if err := s.opt.Verify(layer, expert, s.a.Bytes(layer, expert)); err != nil {
			r.err = fmt.Errorf("expert %d of layer %d failed its check: %w", expert, layer, err)
		}
	}
	if r.err != nil {
		s.a.drop(r.slot)
	} else {
		s.a.publish(r.slot)
	}
	delete(s.inflight, r.key)
	close(r.done)
}

// issue claims a slot for key and queues its read; the caller holds mu. It
// returns nil when every slot is pinned.
func (s *Streamer) issue(key int, urgent bool) *request {
	sl := s.a.claim(key)
	if sl < 0 {
		return nil
	}
	s.a.slots[sl].pins++ // released at a deterministic point, not on completion
	r := &request{key: key, slot: sl, done: make(chan struct{}), urgent: urgent}
	s.inflight[key] = r
	n := 1
	if s.opt.SplitBytes > 0 && urgent && s.a.SlotBytes >= 2*s.opt.SplitBytes {
		n = min(s.opt.Threads, s.a.SlotBytes/s.opt.SplitBytes)
	}
	step := (s.a.SlotBytes/n + PageSize - 1) / PageSize * PageSize
	r.left = (s.a.SlotBytes + step - 1) / step
	// Readers take mu before touching the request, so they cannot finish a
	// part before r.left is set.
	for off := 0; off < s.a.SlotBytes; off += step {
		p := part{req: r, off: off, len: min(step, s.a.SlotBytes-off), taken: new(bool)}
		r.parts = append(r.parts, p)
		s.enqueue(p, urgent)
	}
	return r
}

// Ensure makes a layer's experts resident before the layer's experts run.
// It releases the previous layer's experts for eviction.
func (s *Streamer) Ensure(layer int, experts []int) error {
	start := time.Now()
	defer func() {
		s.mu.Lock()
		s.stats.Stall += time.Since(start)
		s.mu.Unlock()
	}()
	s.mu.Lock()
	s.unpinLayer()
	var wait []*request
	seen := map[int]bool{}
	for _, e := range experts {
		key := layer*s.a.Experts + e
		if seen[key] || e < 0 || e >= s.a.Experts {
			continue
		}
		seen[key] = true
		s.usage.hit(key)
		if s.opt.Trace {
			s.trace = append(s.trace, key)
		}
		if sl := s.a.where[key]; sl >= 0 {
			s.a.touch(sl)
			if r, ok := s.inflight[key]; ok {
				s.stats.Late++
				wait = append(wait, r)
				// A layer waits on it now: promote its unread parts.
				for _, p := range r.parts {
					if !*p.taken {
						s.enqueue(p, true)
					}
				}
			} else {
				s.stats.Hits++
			}
			if r, ok := s.inflight[key]; !ok || !r.urgent {
				s.stats.Used += boolInt(s.wasPrefetched(sl))
			}
			s.pinForLayer(sl)
			continue
		}
		s.stats.Misses++
		r := s.issue(key, true)
		if r == nil && len(s.limbo[layer]) > 0 {
			// This layer's read-aheads hold slots it may not need: retire
			// them now rather than at the end (still a point that does not
			// depend on timing), so an arena that holds the layer's
			// experts always serves it.
			s.mu.Unlock()
			s.retire(layer)
			s.mu.Lock()
			r = s.issue(key, true)
		}
		if r == nil && len(s.limbo) > 0 {
			// Other layers' read-aheads hold the rest (layer-major
			// prefills of two sessions taking turns read ahead for
			// layers neither has reached): retire them too.
			s.mu.Unlock()
			s.retireLimbo()
			s.mu.Lock()
			r = s.issue(key, true)
		}
		if r == nil {
			s.mu.Unlock()
			return fmt.Errorf("the expert arena (%d slots) cannot hold layer %d's experts: every slot is in use; give it more memory", s.a.Capacity(), layer)
		}
		s.pinForLayer(r.slot)
		wait = append(wait, r)
	}
	s.mu.Unlock()
	err := s.await(layer, wait, true)
	s.retire(layer) // this layer's unneeded read-aheads stop holding slots
	return err
}

// await waits for reads a layer needs. A failed read-ahead gets one urgent
// retry; a failed urgent read is an error (its slot is already dropped).
func (s *Streamer) await(layer int, wait []*request, retry bool) error {
	var errs []error
	var again []*request
	for _, r := range wait {
		<-r.done
		s.mu.Lock()
		switch {
		case r.err == nil && r.urgent:
			s.a.slots[r.slot].pins-- // the read's own pin; the layer's stays
		case r.err != nil:
			s.forgetLayerPin(r.slot)
			if !r.urgent && retry {
				if u := s.issue(r.key, true); u != nil {
					s.pinForLayer(u.slot)
					again = append(again, u)
					s.mu.Unlock()
					continue
				}
			}
			errs = append(errs, r.err)
		}
		s.mu.Unlock()
	}
	if len(again) > 0 {
		if err := s.await(layer, again, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (s *Streamer) pinForLayer(sl int) {
	s.a.slots[sl].pins++
	s.layerPin = append(s.layerPin, sl)
}

// forgetLayerPin removes a dropped slot from the layer's pins (drop reset
// its count).
func (s *Streamer) forgetLayerPin(sl int) {
	for i, x := range s.layerPin {
		if x == sl {
			s.layerPin = append(s.layerPin[:i], s.layerPin[i+1:]...)
			return
		}
	}
}

// Release unpins the experts the last Ensure pinned, before the next
// Ensure would: a routed batch is done with its layer's experts once they
// ran, so their slots may take the next layer's read-aheads while the
// windows' segments run.
func (s *Streamer) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unpinLayer()
}

func (s *Streamer) unpinLayer() {
	for _, sl := range s.layerPin {
		s.a.slots[sl].pins--
	}
	s.layerPin = s.layerPin[:0]
}

// wasPrefetched reports (once) that a slot's content came from a read-ahead.
func (s *Streamer) wasPrefetched(sl int) bool {
	if s.a.slots[sl].prefetched {
		s.a.slots[sl].prefetched = false
		return true
	}
	return false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Held reports whether an expert of a layer has a slot: resident, or
// claimed by a read still in flight (which does not depend on timing).
func (s *Streamer) Held(layer, expert int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return expert >= 0 && expert < s.a.Experts && s.a.where[layer*s.a.Experts+expert] >= 0
}

// Rank reorders a layer's resident experts in the eviction order without
// counting a use: the cold ones go to the least recently used end (evicted
// first), the hot ones to the most recently used end, hot[0] last evicted.
// Layer-major prefill ranks a layer's experts this way by the next window
// of the prompt that needs them (routing it already knows): the order of
// Belady's optimum, so the windows after reread as little as the arena
// allows. Experts not resident are skipped; pinned ones stay pinned.
func (s *Streamer) Rank(layer int, cold, hot []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	slotOf := func(e int) int {
		if e < 0 || e >= s.a.Experts {
			return -1
		}
		return s.a.where[layer*s.a.Experts+e]
	}
	for _, e := range cold {
		if sl := slotOf(e); sl >= 0 {
			s.a.unlink(sl)
			s.a.pushBack(sl)
		}
	}
	for i := len(hot) - 1; i >= 0; i-- {
		if sl := slotOf(hot[i]); sl >= 0 {
			s.a.touch(sl)
		}
	}
}

// PrefetchSpare is Prefetch of at most as many experts as the arena has
// spare slots: slots neither pinned nor holding one of keep (layer keep's
// experts, wanted again soon), so the read-aheads evict nothing a later
// use needs sooner than they do.
func (s *Streamer) PrefetchSpare(layer int, experts []int, keepLayer int, keep []int) {
	s.mu.Lock()
	kept := map[int]bool{}
	for _, e := range keep {
		kept[keepLayer*s.a.Experts+e] = true
	}
	spare := 0
	for _, sl := range s.a.slots {
		if sl.pins == 0 && (sl.key < 0 || !kept[sl.key]) {
			spare++
		}
	}
	var want []int
	for _, e := range experts {
		if len(want) == spare {
			break
		}
		if e >= 0 && e < s.a.Experts && s.a.where[layer*s.a.Experts+e] < 0 && !slices.Contains(want, e) {
			want = append(want, e)
		}
	}
	s.mu.Unlock()
	s.Prefetch(layer, want)
}

// Prefetch queues read-aheads for experts a later layer is predicted to
// need. Slots are claimed now (deterministically); the reads land whenever
// the disk delivers and retire at the next BeginWindow.
func (s *Streamer) Prefetch(layer int, experts []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range experts {
		key := layer*s.a.Experts + e
		if e < 0 || e >= s.a.Experts || s.a.where[key] >= 0 {
			continue
		}
		if r := s.issue(key, false); r != nil {
			s.a.slots[r.slot].prefetched = true
			s.stats.Prefetched++
			s.limbo[layer] = append(s.limbo[layer], r)
		}
	}
}

// retireLimbo retires the read-aheads of every layer still in limbo (see
// retire); s.mu must not be held.
func (s *Streamer) retireLimbo() {
	s.mu.Lock()
	var layers []int
	for l := range s.limbo {
		layers = append(layers, l)
	}
	s.mu.Unlock()
	for _, l := range layers {
		s.retire(l)
	}
}

// BeginWindow is the deterministic retirement point: it waits for every
// read-ahead still in flight, unpins them, and refreshes the residency
// routing may see. A failed read-ahead is dropped silently (the layer that
// needs the expert reads it again).
func (s *Streamer) BeginWindow() {
	s.retireLimbo()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unpinLayer()
	for k := range s.visible {
		s.visible[k] = s.a.where[k] >= 0
	}
	s.usage.tick()
}

// retire waits for a layer's read-aheads and unpins them: at that layer's
// Ensure (or the window's end), a point that does not depend on timing, so
// which slots are evictable never does either.
func (s *Streamer) retire(layer int) {
	s.mu.Lock()
	reqs := s.limbo[layer]
	delete(s.limbo, layer)
	s.mu.Unlock()
	for _, r := range reqs {
		<-r.done
	}
	s.mu.Lock()
	for _, r := range reqs {
		if r.err == nil {
			s.a.slots[r.slot].pins--
		}
	}
	s.mu.Unlock()
}

// Visible is the residency of a layer's experts as routing may see it
// (cache-aware routing reads this, never the live arena).
func (s *Streamer) Visible(layer int) []bool {
	return s.visible[layer*s.a.Experts : (layer+1)*s.a.Experts]
}

// Stats returns the telemetry so far.
func (s *Streamer) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Trace returns the keys (layer·E + expert) layers needed, in order, when
// Options.Trace is set.
func (s *Streamer) Trace() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.trace...)
}

// Usage is the decayed usage history the streamer keeps.
func (s *Streamer) Usage() *Usage { return s.usage }

// Fill seeds the arena at startup: it reads the first experts of order (keys
// layer·E + expert, most wanted first) until the arena is full, and waits
// for them. The history keeps counting from u when it is not nil.
func (s *Streamer) Fill(u *Usage, order []int) {
	if u != nil && u.Layers == s.a.Layers && u.Experts == s.a.Experts {
		s.usage = u
		if u.decay == 0 {
			u.decay = NewUsage(1, 1).decay
		}
	}
	n := min(len(order), s.a.Capacity())
	byLayer := map[int][]int{}
	var layers []int
	for _, k := range order[:n] {
		l := k / s.a.Experts
		if _, ok := byLayer[l]; !ok {
			layers = append(layers, l)
		}
		byLayer[l] = append(byLayer[l], k%s.a.Experts)
	}
	for _, l := range layers {
		s.Prefetch(l, byLayer[l])
	}
	s.BeginWindow()
}

// Save writes the usage history and the arena's LRU order to path.
func (s *Streamer) Save(path string) error {
	s.mu.Lock()
	order := s.a.Order()
	s.mu.Unlock()
	return s.usage.Save(path, order)
}
