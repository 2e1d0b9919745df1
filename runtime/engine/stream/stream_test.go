package stream

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// fakePack serves expert blocks whose bytes are a function of (layer,
// expert), with injectable delays and faults.
type fakePack struct {
	size     int
	mu       sync.Mutex
	rng      *rand.Rand
	maxDelay time.Duration
	failN    map[int]int // key → reads left that fail with EIO
	short    map[int]int // key → reads left that come back short
	experts  int
	reads    int
}

func (f *fakePack) content(layer, expert, off int, dst []byte) {
	for i := range dst {
		dst[i] = byte((layer*131 + expert*7 + (off+i)*3) % 251)
	}
}

func (f *fakePack) ReadExpert(layer, expert, off int, dst []byte) error {
	f.mu.Lock()
	f.reads++
	key := layer*f.experts + expert
	var d time.Duration
	if f.maxDelay > 0 {
		d = time.Duration(f.rng.Int63n(int64(f.maxDelay)))
	}
	fail, short := f.failN[key] > 0, f.short[key] > 0
	if fail {
		f.failN[key]--
	}
	if short {
		f.short[key]--
	}
	f.mu.Unlock()
	time.Sleep(d)
	if fail {
		return fmt.Errorf("pread: %w", syscall.EIO)
	}
	f.content(layer, expert, off, dst)
	if short {
		return fmt.Errorf("short read: %d of %d bytes", len(dst)/2, len(dst))
	}
	return nil
}

func newFake(experts int, delay time.Duration, seed int64) *fakePack {
	return &fakePack{size: 2 * PageSize, experts: experts, rng: rand.New(rand.NewSource(seed)), maxDelay: delay, failN: map[int]int{}, short: map[int]int{}}
}

func checkContent(t *testing.T, a *Arena, f *fakePack, layer int, experts []int) {
	t.Helper()
	want := make([]byte, a.SlotBytes)
	for _, e := range experts {
		if !a.Resident(layer, e) {
			t.Fatalf("expert %d of layer %d is not resident after Ensure", e, layer)
		}
		f.content(layer, e, 0, want)
		if !bytes.Equal(a.Bytes(layer, e), want) {
			t.Fatalf("expert %d of layer %d: wrong bytes in its slot", e, layer)
		}
		code := a.Smap[layer*a.Experts+e]
		chunk, page := int(code>>28), int(code&(1<<28-1))
		if !bytes.Equal(a.Chunks[chunk][page*PageSize:page*PageSize+a.SlotBytes], want) {
			t.Fatalf("expert %d of layer %d: smap points at the wrong bytes", e, layer)
		}
	}
}

// trace is a deterministic workload: per window and layer, the experts the
// router chose and the experts predicted for the next layer.
func trace(windows, layers, experts, topK int, seed int64) [][][2][]int {
	rng := rand.New(rand.NewSource(seed))
	out := make([][][2][]int, windows)
	for w := range out {
		out[w] = make([][2][]int, layers)
		for l := range out[w] {
			pick := func() []int {
				var e []int
				for len(e) < topK {
					x := int(rng.ExpFloat64()*float64(experts)/6) % experts // skewed, as real routing is
					if !slices.Contains(e, x) {
						e = append(e, x)
					}
				}
				return e
			}
			out[w][l] = [2][]int{pick(), pick()}
		}
	}
	return out
}

// run drives a streamer through the trace and records what routing could
// see and the final residency.
func run(t *testing.T, threads int, delay time.Duration, seed int64) ([]bool, []int, []uint32) {
	const layers, experts, topK = 4, 64, 6
	f := newFake(experts, delay, seed)
	a, err := NewArena(layers, experts, 2*PageSize, 40)
	if err != nil {
		t.Fatal(err)
	}
	s := NewStreamer(a, f, Options{Threads: threads, Urgent: 1})
	defer s.Close()
	var visible []bool
	for _, w := range trace(30, layers, experts, topK, 1) {
		s.BeginWindow()
		for l := 0; l < layers; l++ {
			visible = append(visible, s.Visible(l)...)
			if err := s.Ensure(l, w[l][0]); err != nil {
				t.Fatal(err)
			}
			checkContent(t, a, f, l, w[l][0])
			if l+1 < layers {
				s.Prefetch(l+1, w[l][1])
			}
		}
	}
	s.BeginWindow()
	return visible, a.Order(), slices.Clone(a.Smap)
}

// Routing-visible residency, LRU order and smap do not depend on read
// timing or thread count.
func TestDeterministicResidency(t *testing.T) {
	v0, o0, m0 := run(t, 8, 0, 1)
	for i, c := range []struct {
		threads int
		delay   time.Duration
	}{{1, time.Millisecond}, {3, 2 * time.Millisecond}, {8, 2 * time.Millisecond}, {2, 0}} {
		v, o, m := run(t, c.threads, c.delay, int64(i+2))
		if !slices.Equal(v, v0) || !slices.Equal(o, o0) || !slices.Equal(m, m0) {
			t.Fatalf("run %d (%d threads, delays up to %v): residency differs from the undelayed run", i, c.threads, c.delay)
		}
	}
}

func TestFaults(t *testing.T) {
	a, _ := NewArena(1, 8, PageSize, 8)
	f := newFake(8, 0, 1)
	f.failN[3] = 1 // one EIO, then fine: retried
	f.short[4] = 1 // one short read: retried
	s := NewStreamer(a, f, Options{Threads: 2, Urgent: 1, Retries: 2})
	if err := s.Ensure(0, []int{3, 4}); err != nil {
		t.Fatalf("transient faults were not retried: %v", err)
	}
	checkContent(t, a, f, 0, []int{3, 4})

	f.failN[5] = 100 // persistent
	err := s.Ensure(0, []int{5, 6})
	if err == nil || !errors.Is(err, syscall.EIO) {
		t.Fatalf("persistent EIO: err = %v", err)
	}
	if a.Resident(0, 5) || a.Smap[5] != Miss {
		t.Error("a failed expert is marked resident")
	}
	s.Close()

	// Corrupt bytes under a check: never published.
	a2, _ := NewArena(1, 8, PageSize, 8)
	s2 := NewStreamer(a2, newFake(8, 0, 1), Options{Threads: 1, Verify: func(l, e int, b []byte) error {
		if e == 2 {
			return errors.New("checksum mismatch")
		}
		return nil
	}})
	defer s2.Close()
	if err := s2.Ensure(0, []int{1, 2}); err == nil {
		t.Fatal("a corrupt expert passed")
	}
	if a2.Resident(0, 2) || a2.Smap[2] != Miss || !a2.Resident(0, 1) {
		t.Error("residency after a failed check: the bad expert must be absent, the good one present")
	}
}

func TestArenaTooSmall(t *testing.T) {
	a, _ := NewArena(1, 16, PageSize, 3)
	s := NewStreamer(a, newFake(16, 0, 1), Options{Threads: 2})
	defer s.Close()
	if err := s.Ensure(0, []int{1, 2, 3, 4}); err == nil {
		t.Fatal("four experts fit in three slots")
	}
}

// Reads of a large expert are split across threads, and the parts land
// where they belong.
func TestSplitReads(t *testing.T) {
	a, _ := NewArena(1, 4, 8*PageSize, 4)
	f := newFake(4, 0, 1)
	s := NewStreamer(a, f, Options{Threads: 4, SplitBytes: 2 * PageSize})
	defer s.Close()
	if err := s.Ensure(0, []int{0, 3}); err != nil {
		t.Fatal(err)
	}
	checkContent(t, a, f, 0, []int{0, 3})
	if f.reads != 8 {
		t.Errorf("%d reads for two experts of 8 pages split by 2, want 8", f.reads)
	}
}

// A layer whose reads split into more parts than any fixed queue holds (the
// real models' 64-row prefill windows: 512 experts × 3 parts) is served:
// queueing under the streamer's lock never blocks the readers who drain it
// (before, a channel of 1,024 parts filled and the window hung).
func TestManyPartsInOneLayer(t *testing.T) {
	const experts = 512
	a, err := NewArena(1, experts, 4*PageSize, experts)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(experts, 0, 1)
	s := NewStreamer(a, f, Options{Threads: 4, Urgent: 1, SplitBytes: PageSize})
	defer s.Close()
	all := make([]int, experts)
	for i := range all {
		all[i] = i
	}
	done := make(chan error, 1)
	go func() { done <- s.Ensure(0, all) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a layer of 2,048 parts did not finish in a minute: the queueing deadlocked")
	}
	checkContent(t, a, f, 0, all)
	if f.reads != 4*experts {
		t.Errorf("%d reads for %d experts of 4 pages split by 1, want %d", f.reads, experts, 4*experts)
	}
}

func TestUsageHistory(t *testing.T) {
	u := NewUsage(2, 4)
	u.hit(1)
	u.hit(1)
	u.hit(6)
	u.tick()
	path := filepath.Join(t.TempDir(), "m.gguf.experts.usage")
	if err := u.Save(path, []int{6, 1}); err != nil {
		t.Fatal(err)
	}
	back, err := LoadUsage(path, 2, 4)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Counts, u.Counts) || !slices.Equal(back.Order, []int{6, 1}) || back.Windows != u.Windows {
		t.Errorf("history did not round-trip: %+v", back)
	}
	if _, err := LoadUsage(path, 3, 4); err == nil {
		t.Error("a history for another model shape was accepted")
	}
	data, _ := os.ReadFile(path)
	os.WriteFile(path, data[:len(data)-3], 0o644)
	if _, err := LoadUsage(path, 2, 4); err == nil {
		t.Error("a truncated history was accepted")
	}
	order := FillOrder(back, []float64{0, 0, 9, 0, 0, 0, 0, 1}, 0.7, 0.5)
	if order[0] != 1 {
		t.Errorf("fill order %v: the most used expert (key 1) should lead once the history counts", order[:3])
	}
	order = FillOrder(back, []float64{0, 0, 9, 0, 0, 0, 0, 1}, 0.7, 100)
	if order[0] != 2 {
		t.Errorf("fill order %v: with too little history the profile leads", order[:3])
	}
}

// A textbook trace: MIN beats LRU, and neither beats MIN.
func TestSimulations(t *testing.T) {
	tr := []int{1, 2, 3, 4, 1, 2, 5, 1, 2, 3, 4, 5}
	if got := LRUHits(tr, 3); got != 2 {
		t.Errorf("LRU hits %d, want 2", got)
	}
	if got := BeladyHits(tr, 3); got != 5 {
		t.Errorf("MIN hits %d, want 5", got)
	}
}

// sleepyPack takes a fixed time per read.
type sleepyPack struct{ d time.Duration }

func (p sleepyPack) ReadExpert(layer, expert, off int, dst []byte) error {
	time.Sleep(p.d)
	return nil
}

// ReadTime sums the time every read took; ReadBusy counts the time reads
// overlap once, so parallel readers make it shorter.
func TestReadTime(t *testing.T) {
	const d = 10 * time.Millisecond
	a, _ := NewArena(1, 8, PageSize, 8)
	s := NewStreamer(a, sleepyPack{d}, Options{Threads: 4})
	defer s.Close()
	if err := s.Ensure(0, []int{0, 1, 2, 3, 4, 5, 6, 7}); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if st.ReadTime < 8*d {
		t.Errorf("ReadTime %v for 8 reads of %v each", st.ReadTime, d)
	}
	if st.ReadBusy < 2*d || st.ReadBusy > st.ReadTime/2 {
		t.Errorf("ReadBusy %v for 8 reads of %v on 4 threads (ReadTime %v): want overlapping reads counted once", st.ReadBusy, d, st.ReadTime)
	}
	if st.ReadBusy > st.Stall {
		t.Errorf("ReadBusy %v > Stall %v: the layer waited for all of them", st.ReadBusy, st.Stall)
	}
}

// Rank sets the eviction order without counting uses: the cold experts
// first, then the others as they were, the hot ones last (hot[0] the very
// last); and
// PrefetchSpare reads ahead only into slots that hold no hot expert.
func TestRankAndPrefetchSpare(t *testing.T) {
	a, err := NewArena(1, 16, 2*PageSize, 6)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake(16, 0, 1)
	s := NewStreamer(a, f, Options{Threads: 2})
	defer s.Close()
	if err := s.Ensure(0, []int{0, 1, 2, 3, 4, 5}); err != nil {
		t.Fatal(err)
	}
	before := s.Stats()
	s.Rank(0, []int{5, 4}, []int{0, 2})
	if got, want := a.Order(), []int{0, 2, 3, 1, 5, 4}; !slices.Equal(got, want) {
		t.Fatalf("order after Rank %v, want %v", got, want)
	}
	if s.Stats() != before {
		t.Fatalf("Rank counted uses: %+v, was %+v", s.Stats(), before)
	}
	s.BeginWindow() // unpins the layer's experts
	// Four slots hold no hot expert (1, 3, 4, 5): of six wanted, four are
	// read ahead.
	s.PrefetchSpare(0, []int{6, 7, 8, 9, 10, 11}, 0, []int{0, 2})
	s.BeginWindow()
	for _, e := range []int{0, 2} {
		if !a.Resident(0, e) {
			t.Fatalf("hot expert %d was evicted by a read-ahead", e)
		}
	}
	if got := s.Stats().Prefetched; got != 4 {
		t.Fatalf("%d read ahead, want 4 (the spare slots)", got)
	}
	for _, e := range []int{6, 7, 8, 9} {
		if !a.Resident(0, e) {
			t.Fatalf("read-ahead %d is not resident", e)
		}
	}
}
