package graph

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand"
	"slices"
	"sync"
	"testing"
)

// The random graphs of these tests: a few small buffers, dispatches that read
// and write random byte ranges of them, and host points that rewrite the
// experts buffer from what their router wrote.
var testBuffers = []Buffer{
	{Name: "act", Kind: KindScratch, Size: 96},
	{Name: "state", Kind: KindState, Size: 48},
	{Name: "weights", Kind: KindWeights, Size: 64},
	{Name: "experts", Kind: KindExperts, Size: 32},
	{Name: "params", Kind: KindParams, Size: 16},
}

func randomRange(rng *rand.Rand, bufs []Buffer) Range {
	b := bufs[rng.Intn(len(bufs))]
	off := rng.Int63n(b.Size)
	size := 1 + rng.Int63n(min(24, b.Size-off))
	return Range{Buffer: b.Name, Offset: off, Size: size}
}

// randomGraph builds n dispatches; each is named by its original index (the
// kernel name), so the executor can find its identity after reordering.
func randomGraph(rng *rand.Rand, n, hosts int) *Graph {
	g := &Graph{Model: "random", Rows: 1, Buffers: testBuffers}
	readable := testBuffers
	writable := testBuffers[:2]
	for i := 0; i < n; i++ {
		d := Dispatch{Kernel: fmt.Sprint(i), Family: "random", Layer: i * 4 / n,
			Grid: [3]int{1, 1, 1}, Threadgroup: [3]int{32, 1, 1}}
		for r := rng.Intn(4); r > 0; r-- {
			d.Reads = append(d.Reads, randomRange(rng, readable))
		}
		for w := 1 + rng.Intn(2); w > 0; w-- {
			if len(d.Reads) > 0 && d.Reads[0].Buffer != "weights" && d.Reads[0].Buffer != "experts" && d.Reads[0].Buffer != "params" && rng.Intn(3) == 0 {
				d.Writes = append(d.Writes, d.Reads[0]) // read-modify-write, like a residual add
			} else {
				d.Writes = append(d.Writes, randomRange(rng, writable))
			}
		}
		for s, r := range d.Reads {
			d.Args = append(d.Args, Binding{Slot: s, Name: fmt.Sprint("in", s), Access: Read, Range: r})
		}
		for s, w := range d.Writes {
			d.Args = append(d.Args, Binding{Slot: len(d.Reads) + s, Name: fmt.Sprint("out", s), Access: Write, Range: w})
		}
		g.Dispatches = append(g.Dispatches, d)
	}
	afters := rng.Perm(n)[:min(hosts, n)]
	slices.Sort(afters)
	for k, a := range afters {
		g.HostPoints = append(g.HostPoints, HostPoint{Layer: k, After: a})
	}
	return g
}

// memory is the executable semantics: each dispatch hashes its identity and
// the bytes it reads into every byte it writes; host point k fills the experts
// buffer from k and the bytes its router wrote.
type memory map[string][]byte

func newMemory() memory {
	m := memory{}
	for _, b := range testBuffers {
		m[b.Name] = make([]byte, b.Size)
		for i := range m[b.Name] {
			m[b.Name][i] = byte(i*7 + len(b.Name))
		}
	}
	return m
}

func (m memory) bytes(r Range) []byte { return m[r.Buffer][r.Offset:r.End()] }

func mix(h uint64, parts ...int64) byte {
	f := fnv.New64a()
	binary.Write(f, binary.LittleEndian, h)
	for _, p := range parts {
		binary.Write(f, binary.LittleEndian, p)
	}
	return byte(f.Sum64())
}

func (m memory) fill(h uint64, writes []Range) {
	for j, w := range writes {
		out := m.bytes(w)
		for o := range out {
			out[o] = mix(h, int64(j), w.Offset+int64(o))
		}
	}
}

func (m memory) run(d *Dispatch) {
	f := fnv.New64a()
	f.Write([]byte(d.Kernel))
	for _, r := range d.Reads {
		f.Write(m.bytes(r))
	}
	m.fill(f.Sum64(), d.Writes)
}

func (m memory) host(k int, router *Dispatch) {
	f := fnv.New64a()
	fmt.Fprint(f, "host", k)
	for _, w := range router.Writes {
		f.Write(m.bytes(w))
	}
	m.fill(f.Sum64(), []Range{{Buffer: "experts", Size: 32}})
}

func (m memory) equal(o memory) bool {
	for name, b := range m {
		if !bytes.Equal(b, o[name]) {
			return false
		}
	}
	return true
}

// runSerial executes g in list order, each host point right after its router.
func runSerial(g *Graph) memory {
	m := newMemory()
	k := 0
	for i := range g.Dispatches {
		m.run(&g.Dispatches[i])
		for ; k < len(g.HostPoints) && g.HostPoints[k].After == i; k++ {
			m.host(k, &g.Dispatches[i])
		}
	}
	return m
}

// executionGroups are the barrier groups, cut also at each host signal and
// wait, since a backend ends its encoder there.
func executionGroups(g *Graph) [][]int {
	cut := map[int]bool{}
	for _, h := range g.HostPoints {
		cut[h.After+1], cut[h.Wait] = true, true
	}
	var out [][]int
	for i := range g.Dispatches {
		if i == 0 || g.Dispatches[i].Barrier || cut[i] {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], i)
	}
	return out
}

type order int

const (
	shuffled order = iota
	reversed
	concurrent
)

// runGroups executes g group by group, the dispatches of a group shuffled,
// reversed or all at once; host point k runs once its router's group is done
// and must be done before the group at its wait, concurrently with the work
// between (shuffled: at a random group boundary in between).
func runGroups(g *Graph, how order, rng *rand.Rand) memory {
	m := newMemory()
	groups := executionGroups(g)
	type pending struct {
		k    int
		done chan struct{}
	}
	var running []pending
	startHost := func(k int) {
		p := pending{k: k, done: make(chan struct{})}
		router := &g.Dispatches[g.HostPoints[k].After]
		if how == concurrent {
			go func() { m.host(k, router); close(p.done) }()
		} else {
			m.host(k, router)
			close(p.done)
		}
		running = append(running, p)
	}
	var delayed []int // host points of the shuffled order not yet run
	for _, grp := range groups {
		first, last := grp[0], grp[len(grp)-1]
		// Host points whose wait is here must be finished.
		for _, k := range slices.Clone(delayed) {
			if g.HostPoints[k].Wait <= first {
				startHost(k)
				delayed = slices.DeleteFunc(delayed, func(x int) bool { return x == k })
			} else if rng.Intn(2) == 0 {
				startHost(k)
				delayed = slices.DeleteFunc(delayed, func(x int) bool { return x == k })
			}
		}
		for _, p := range slices.Clone(running) {
			if g.HostPoints[p.k].Wait <= first {
				<-p.done
				running = slices.DeleteFunc(running, func(x pending) bool { return x.k == p.k })
			}
		}
		switch how {
		case concurrent:
			var wg sync.WaitGroup
			for _, i := range grp {
				wg.Add(1)
				go func() { defer wg.Done(); m.run(&g.Dispatches[i]) }()
			}
			wg.Wait()
		case reversed:
			for j := len(grp) - 1; j >= 0; j-- {
				m.run(&g.Dispatches[grp[j]])
			}
		default:
			for _, j := range rng.Perm(len(grp)) {
				m.run(&g.Dispatches[grp[j]])
			}
		}
		for k, h := range g.HostPoints {
			if h.After == last {
				if how == shuffled {
					delayed = append(delayed, k)
				} else {
					startHost(k)
				}
			}
		}
	}
	for _, k := range delayed {
		startHost(k)
	}
	for _, p := range running {
		<-p.done
	}
	return m
}

// originalIndex is a dispatch's index before any pass, from its name.
func originalIndex(t *testing.T, d *Dispatch) int {
	var i int
	if _, err := fmt.Sscan(d.Kernel, &i); err != nil {
		t.Fatalf("dispatch named %q", d.Kernel)
	}
	return i
}

func cloneGraph(g *Graph) *Graph {
	c := *g
	c.Dispatches = slices.Clone(g.Dispatches)
	c.HostPoints = slices.Clone(g.HostPoints)
	return &c
}

// TestOptimizeRandomGraphs is the property test of the passes: on random
// graphs, the optimized order is a permutation that keeps every hazard and
// every router in front of its host point; every barrier group (cut at host
// signals and waits) is free of hazards; executing the groups shuffled,
// reversed or concurrently (a race under -race if a barrier is missing)
// gives what serial execution of the original order gives; the placed
// barriers never go below the lower bounds; and Optimize is idempotent.
func TestOptimizeRandomGraphs(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := 0; trial < 300; trial++ {
		n := 1 + rng.Intn(40)
		orig := randomGraph(rng, n, rng.Intn(5))
		want := runSerial(orig)
		g := cloneGraph(orig)
		if err := Optimize(g); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		if err := g.Check(); err != nil {
			t.Fatalf("trial %d: %v", trial, err)
		}
		fail := func(format string, args ...any) {
			t.Helper()
			t.Fatalf("trial %d (%d dispatches, host points %v → %v): %s", trial, n, orig.HostPoints, g.HostPoints, fmt.Sprintf(format, args...))
		}

		pos := make([]int, n) // original index → new position
		seen := make([]bool, n)
		for p := range g.Dispatches {
			o := originalIndex(t, &g.Dispatches[p])
			if seen[o] {
				fail("dispatch %d appears twice", o)
			}
			seen[o], pos[o] = true, p
		}
		for i := 0; i < n; i++ {
			for j := i + 1; j < n; j++ {
				a := access{orig.Dispatches[i].Reads, orig.Dispatches[i].Writes}
				b := access{orig.Dispatches[j].Reads, orig.Dispatches[j].Writes}
				if hazard(a, b) && pos[i] > pos[j] {
					fail("dispatch %d moved past dispatch %d it has a hazard with", j, i)
				}
			}
		}
		for k, h := range g.HostPoints {
			if pos[orig.HostPoints[k].After] != h.After {
				fail("host point %d no longer follows its router", k)
			}
			if h.Wait <= h.After {
				fail("host point %d waits at %d, before its signal", k, h.Wait)
			}
		}
		for _, grp := range executionGroups(g) {
			for x, i := range grp {
				for _, j := range grp[x+1:] {
					a := access{g.Dispatches[i].Reads, g.Dispatches[i].Writes}
					b := access{g.Dispatches[j].Reads, g.Dispatches[j].Writes}
					if hazard(a, b) {
						fail("dispatches %d and %d share a barrier group but conflict", i, j)
					}
				}
			}
		}

		if got := runSerial(g); !got.equal(want) {
			fail("serial execution of the optimized graph differs")
		}
		for seed := int64(0); seed < 3; seed++ {
			if got := runGroups(g, shuffled, rand.New(rand.NewSource(seed))); !got.equal(want) {
				fail("shuffled barrier groups (seed %d) differ from serial execution", seed)
			}
		}
		if got := runGroups(g, reversed, rng); !got.equal(want) {
			fail("reversed barrier groups differ from serial execution")
		}
		if got := runGroups(g, concurrent, rng); !got.equal(want) {
			fail("concurrent barrier groups differ from serial execution")
		}

		a := NewAudit(g)
		if a.BarrierLowerBound > a.BarrierBoundWithWaits || a.BarrierBoundWithWaits > a.Barriers {
			fail("bounds %d ≤ %d ≤ placed %d do not hold", a.BarrierLowerBound, a.BarrierBoundWithWaits, a.Barriers)
		}
		if len(orig.HostPoints) == 0 && a.Barriers != a.BarrierLowerBound {
			// Without host points the schedule is by dependency level,
			// which meets the bound exactly.
			fail("placed %d barriers, the bound is %d", a.Barriers, a.BarrierLowerBound)
		}
		if a.BarriersNaive != n-1 {
			fail("naive count %d, want %d", a.BarriersNaive, n-1)
		}

		again := cloneGraph(g)
		if err := Optimize(again); err != nil {
			fail("second Optimize: %v", err)
		}
		j1, _ := g.JSON()
		j2, _ := again.JSON()
		if !bytes.Equal(j1, j2) {
			fail("Optimize is not idempotent")
		}
	}
}

// TestExecutorCatchesMissingBarriers is the control for the property test:
// with the barriers dropped, shuffled execution must differ from serial
// execution on some random graphs, so the property test can fail.
func TestExecutorCatchesMissingBarriers(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	caught := 0
	for trial := 0; trial < 50; trial++ {
		g := randomGraph(rng, 20, 2)
		want := runSerial(g)
		if err := Optimize(g); err != nil {
			t.Fatal(err)
		}
		for i := range g.Dispatches {
			g.Dispatches[i].Barrier = false
		}
		if got := runGroups(g, reversed, rng); !got.equal(want) {
			caught++
		}
	}
	if caught < 25 {
		t.Fatalf("only %d of 50 graphs changed without barriers: the executor is not sensitive enough", caught)
	}
}

// TestDependenciesMatchHazards checks the interval bookkeeping against the
// all-pairs definition: every edge is a real hazard, and every hazardous pair
// is connected by a path.
func TestDependenciesMatchHazards(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 200; trial++ {
		g := randomGraph(rng, 1+rng.Intn(50), 0)
		ds := g.Dispatches
		preds := Dependencies(ds)
		reach := make([][]bool, len(ds)) // reach[j][i]: a path from i to j
		for j := range ds {
			reach[j] = make([]bool, len(ds))
			for _, p := range preds[j] {
				a := access{ds[p].Reads, ds[p].Writes}
				b := access{ds[j].Reads, ds[j].Writes}
				if p >= j || !hazard(a, b) {
					t.Fatalf("trial %d: edge %d → %d is not a hazard", trial, p, j)
				}
				reach[j][p] = true
				for i := range p {
					reach[j][i] = reach[j][i] || reach[p][i]
				}
			}
		}
		for i := range ds {
			for j := i + 1; j < len(ds); j++ {
				a := access{ds[i].Reads, ds[i].Writes}
				b := access{ds[j].Reads, ds[j].Writes}
				if hazard(a, b) && !reach[j][i] {
					t.Fatalf("trial %d: hazard %d → %d has no path", trial, i, j)
				}
			}
		}
	}
}
