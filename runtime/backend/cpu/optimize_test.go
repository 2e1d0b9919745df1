package cpu_test

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// scramble puts the dispatches of g in a random order that keeps every
// hazard and every host point (each segment up to a router stays in place,
// the router last), as a careless generator might emit them, and drops the
// barriers and waits that belonged to the old order.
func scramble(g *graph.Graph, rng *rand.Rand) {
	preds := graph.Dependencies(g.Dispatches)
	n := len(g.Dispatches)
	placed := make([]bool, n)
	var order []int
	start := 0
	for k := 0; k <= len(g.HostPoints); k++ {
		end := n - 1
		if k < len(g.HostPoints) {
			end = g.HostPoints[k].After - 1 // the router itself stays last
		}
		for {
			var ready []int
			for v := start; v <= end; v++ {
				if !placed[v] && !slices.ContainsFunc(preds[v], func(p int) bool { return !placed[p] }) {
					ready = append(ready, v)
				}
			}
			if len(ready) == 0 {
				break
			}
			v := ready[rng.Intn(len(ready))]
			placed[v] = true
			order = append(order, v)
		}
		if k < len(g.HostPoints) {
			placed[end+1] = true
			order = append(order, end+1)
			g.HostPoints[k] = graph.HostPoint{Layer: g.HostPoints[k].Layer, After: len(order) - 1}
		}
		start = end + 2
	}
	ds := make([]graph.Dispatch, n)
	for i, v := range order {
		ds[i] = g.Dispatches[v]
		ds[i].Barrier = false
	}
	g.Dispatches = ds
	g.ICB = nil
}

// TestOptimizeRestoresScrambledGraphs: the generator's graphs scrambled into
// random legal orders and optimized again get the same number of barriers as
// the generator's optimized graphs, and run the oracle model with every
// barrier group concurrent (a race under -race if a barrier is missing) to
// the same logits.
func TestOptimizeRestoresScrambledGraphs(t *testing.T) {
	barriers := map[int]int{}
	serial := logitsUnder(t, loadWithGraphs(t, func(g *graph.Graph) {
		barriers[g.Rows] = graph.NewAudit(g).Barriers
	}), backend.Serial, 0)
	for seed := int64(1); seed <= 2; seed++ {
		rng := rand.New(rand.NewSource(seed))
		m := loadWithGraphs(t, func(g *graph.Graph) {
			scramble(g, rng)
			if err := graph.Optimize(g); err != nil {
				t.Fatal(err)
			}
			if got := graph.NewAudit(g).Barriers; got != barriers[g.Rows] {
				t.Errorf("seed %d, T=%d: %d barriers after scrambling, %d before", seed, g.Rows, got, barriers[g.Rows])
			}
		})
		if got := logitsUnder(t, m, backend.Concurrent, 0); !slices.Equal(got, serial) {
			t.Fatalf("seed %d: the scrambled and optimized graphs changed the logits", seed)
		}
	}
}

// TestScrambleIsWorse is the control: scrambled graphs with barriers placed
// by the simple rule but not reordered need more barriers in all, so the test
// above shows the reordering at work.
func TestScrambleIsWorse(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	before, after := 0, 0
	loadWithGraphs(t, func(g *graph.Graph) {
		before += graph.NewAudit(g).Barriers
		scramble(g, rng)
		after += graph.PlaceBarriers(g.Dispatches)
	})
	if after <= before {
		t.Errorf("scrambling left %d barriers (optimized: %d)", after, before)
	}
	t.Logf("%d barriers optimized, %d scrambled", before, after)
}

// TestChunkedGraphsRun: with a tiny grid limit nearly every dispatch is split
// into chunks; the cpu backend runs each dispatch once (in its first chunk)
// and the logits do not change, chunks concurrent or not.
func TestChunkedGraphsRun(t *testing.T) {
	serial := logitsUnder(t, loadWithGraphs(t, func(*graph.Graph) {}), backend.Serial, 0)
	lim := graph.DefaultLimits
	lim.MaxThreadgroupsPerGrid = 3
	chunked := 0
	m := loadWithGraphs(t, func(g *graph.Graph) {
		before := len(g.Dispatches)
		if err := graph.OptimizeWith(g, lim); err != nil {
			t.Fatal(err)
		}
		chunked += len(g.Dispatches) - before
	})
	if chunked == 0 {
		t.Fatal("no dispatch was chunked")
	}
	for _, order := range []backend.Order{backend.Serial, backend.Concurrent} {
		if got := logitsUnder(t, m, order, 0); !slices.Equal(got, serial) {
			t.Fatalf("chunked graphs (order %d) changed the logits", order)
		}
	}
}
