package graph_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

func realGraph(tb testing.TB, model string, rows int) *graph.Graph {
	tb.Helper()
	c, err := models.Embedded(model)
	if err != nil {
		tb.Fatal(err)
	}
	g, err := gen.Window(c, rows, gen.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// On the generated models the passes place exactly as many barriers as the
// bound that keeps the host waits allows (the scheduler loses nothing), and
// stay within 10% of the plain dependency bound (the rest is the shared
// expert running between signal and wait).
func TestRealGraphsNearTheBound(t *testing.T) {
	for _, model := range []string{"tiny-a", "tiny-k512", "qwen3-next-80b-a3b"} {
		for _, rows := range []int{1, 4} {
			a := graph.NewAudit(realGraph(t, model, rows))
			t.Logf("%s T=%d: %d dispatches, barriers %d placed, %d naive, %d bound, %d with waits",
				model, rows, a.Dispatches, a.Barriers, a.BarriersNaive, a.BarrierLowerBound, a.BarrierBoundWithWaits)
			if a.Barriers != a.BarrierBoundWithWaits {
				t.Errorf("%s T=%d: %d barriers placed, the bound keeping host waits is %d", model, rows, a.Barriers, a.BarrierBoundWithWaits)
			}
			if float64(a.Barriers) > 1.1*float64(a.BarrierLowerBound) {
				t.Errorf("%s T=%d: %d barriers placed, more than 10%% over the bound %d", model, rows, a.Barriers, a.BarrierLowerBound)
			}
		}
	}
}

// BenchmarkOptimize runs the passes (guards, chunking, hazard analysis,
// reordering, barrier placement, ICB plan) on the real model's window graph;
// they run at go generate time, once per shape.
func BenchmarkOptimize(b *testing.B) {
	for _, rows := range []int{1, 4} {
		g := realGraph(b, "qwen3-next-80b-a3b", rows)
		b.Run(fmt.Sprintf("qwen3-next-80b-a3b/T=%d/%d-dispatches", rows, len(g.Dispatches)), func(b *testing.B) {
			for b.Loop() {
				h := *g
				h.Dispatches = slices.Clone(g.Dispatches)
				h.HostPoints = slices.Clone(g.HostPoints)
				if err := graph.Optimize(&h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAudit is the audit of the same graphs (strata graph audit,
// stratagen's audit files).
func BenchmarkAudit(b *testing.B) {
	for _, rows := range []int{1, 4} {
		g := realGraph(b, "qwen3-next-80b-a3b", rows)
		b.Run(fmt.Sprintf("qwen3-next-80b-a3b/T=%d", rows), func(b *testing.B) {
			for b.Loop() {
				graph.NewAudit(g)
			}
		})
	}
}

// Each pass of the table, run again on the optimizer's output of a real
// window, changes nothing: the table is the whole pipeline, and its order
// is one no pass undoes.
func TestPassesSettled(t *testing.T) {
	names := map[string]bool{}
	for _, p := range graph.Passes {
		if p.Name == "" || names[p.Name] || p.Fn == nil {
			t.Fatalf("pass %q: a name and a function, once each", p.Name)
		}
		names[p.Name] = true
	}
	for _, model := range []string{"tiny-a", "qwen3-next-80b-a3b"} {
		g := realGraph(t, model, 4)
		want, err := g.JSON()
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range graph.Passes {
			h, err := graph.Decode(want)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.Fn(h, graph.DefaultLimits); err != nil {
				t.Fatalf("%s: pass %s: %v", model, p.Name, err)
			}
			if got, _ := h.JSON(); string(got) != string(want) {
				t.Errorf("%s: pass %s changes the optimized graph", model, p.Name)
			}
		}
	}
}

// Every barrier the passes place is needed: with any one of them removed
// (and the ICB plan redone to match), the window no longer validates.
func TestValidateNeedsEveryBarrier(t *testing.T) {
	g := realGraph(t, "tiny-a", 4)
	if err := g.Validate(); err != nil {
		t.Fatal(err)
	}
	hazards := 0
	for i := range g.Dispatches {
		if !g.Dispatches[i].Barrier {
			continue
		}
		h := *g
		h.Dispatches = slices.Clone(g.Dispatches)
		h.Dispatches[i].Barrier = false
		h.ICB = graph.PlanICB(&h)
		err := h.Validate()
		if err == nil {
			t.Fatalf("the window validates without the barrier before dispatch %d (%s)", i, g.Dispatches[i].Kernel)
		}
		if strings.Contains(err.Error(), "no barrier between them") {
			hazards++
		}
	}
	if hazards == 0 {
		t.Error("no removal was refused as a hazard without a barrier; every one as unwritten scratch")
	}
	t.Logf("%d barriers, each needed; %d refused as a hazard across no barrier", graph.NewAudit(g).Barriers, hazards)
}
