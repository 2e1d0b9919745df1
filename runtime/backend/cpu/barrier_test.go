package cpu_test

import (
	"slices"
	"testing"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/engine"
)

// loadWithGraphs loads the tiny-a oracle over graphs edited by edit, with an
// extra 7-row prefill shape.
func loadWithGraphs(t *testing.T, edit func(*graph.Graph)) *engine.Model {
	return e2e.LoadEdited(t, "tiny-a", 7, edit)
}

// logitsUnder runs 20 reference tokens in windows of 7 rows, then 3 decode
// rows, with the given order inside barrier groups.
func logitsUnder(t *testing.T, m *engine.Model, order backend.Order, seed int64) []float32 {
	t.Helper()
	m.SetOrder(order, seed)
	ref := e2e.Ref(t, "tiny-a")
	s := m.NewSession()
	var all []float32
	_, err := s.Generate(ref.Tokens[:20], 4, engine.GenerateOptions{PrefillRows: 7, OnLogits: func(r []float32) error {
		all = append(all, r...)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

// TestBarrierGroupsCommute: running each barrier group's dispatches in a
// shuffled order, or all at once in goroutines (a data race under -race if a
// barrier is missing), gives bit-identical logits.
func TestBarrierGroupsCommute(t *testing.T) {
	m := loadWithGraphs(t, func(*graph.Graph) {})
	serial := logitsUnder(t, m, backend.Serial, 0)
	for seed := int64(1); seed <= 4; seed++ {
		if got := logitsUnder(t, m, backend.Shuffled, seed); !slices.Equal(got, serial) {
			t.Fatalf("shuffled order (seed %d) changed the logits", seed)
		}
	}
	if got := logitsUnder(t, m, backend.Concurrent, 0); !slices.Equal(got, serial) {
		t.Fatal("concurrent barrier groups changed the logits")
	}
}

// TestMissingBarriersAreCaught is the control for the test above: with the
// barriers dropped, a shuffled order must change the result, so the property
// test can fail.
func TestMissingBarriersAreCaught(t *testing.T) {
	serial := logitsUnder(t, loadWithGraphs(t, func(*graph.Graph) {}), backend.Serial, 0)
	m := loadWithGraphs(t, func(g *graph.Graph) {
		for i := range g.Dispatches {
			g.Dispatches[i].Barrier = false
		}
	})
	if got := logitsUnder(t, m, backend.Shuffled, 1); slices.Equal(got, serial) {
		t.Fatal("one barrier group in a shuffled order still gave the serial logits: the order test could not fail")
	}
}
