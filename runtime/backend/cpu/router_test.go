package cpu

import (
	"math"
	"slices"
	"testing"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// runRouter routes one row of logits with MoCE over the given residency and
// returns the chosen ids and weights.
func runRouter(t *testing.T, logits []float32, resident []uint32, k, protect, maxRank int, lambda float64) ([]uint32, []float32) {
	t.Helper()
	E := len(logits)
	r := func(buf string, off, size int64) graph.Range {
		return graph.Range{Buffer: buf, Offset: off, Size: size}
	}
	g := &graph.Graph{Model: "router-test", Kind: graph.KindTrunk, Rows: 1, Buffers: []graph.Buffer{
		{Name: "params", Kind: graph.KindParams, Size: 64}, {Name: "act", Kind: graph.KindScratch, Size: 1024},
		{Name: "residency", Kind: graph.KindResidency, Size: int64(4 * E)},
	}}
	d := graph.Dispatch{Kernel: "router", Family: "router",
		Consts:  []graph.Const{{Name: "rows", Value: 1}, {Name: "experts", Value: int64(E)}, {Name: "top_k", Value: int64(k)}, {Name: "norm_topk", Value: 1}, {Name: "moce", Value: 1}, {Name: "protect", Value: int64(protect)}, {Name: "max_rank", Value: int64(maxRank)}},
		Scalars: []graph.Scalar{{Name: "lambda", Value: lambda}},
		Args: []graph.Binding{{Name: "params", Access: graph.Read, Range: r("params", 0, 64)}, {Name: "logits", Access: graph.Read, Range: r("act", 0, int64(4*E))},
			{Name: "resident", Access: graph.Read, Range: r("residency", 0, int64(4*E))},
			{Name: "ids", Access: graph.Write, Range: r("act", 512, int64(4*k))}, {Name: "weights", Access: graph.Write, Range: r("act", 768, int64(4*k))}}}
	g.Dispatches = []graph.Dispatch{d}
	mem, err := backend.NewHostMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	backend.Uint32s(mem.Buffer("params"))[0] = 1
	copy(backend.Float32s(mem.Buffer("act")), logits)
	copy(backend.Uint32s(mem.Buffer("residency")), resident)
	p, err := Compile(g, mem)
	if err != nil {
		t.Fatal(err)
	}
	p.Run()
	act := mem.Buffer("act")
	return slices.Clone(backend.Uint32s(act[512 : 512+4*k])), slices.Clone(backend.Float32s(act[768 : 768+4*k]))
}

// Hand-worked MoCE cases: logits give probabilities in rank order 0…7.
func TestRouterMoCE(t *testing.T) {
	logits := []float32{4, 3.9, 3.8, 3.7, 3.65, 3.6, 1, 0.5} // ranks follow the index
	all := []uint32{1, 1, 1, 1, 1, 1, 1, 1}
	// Everything resident: the true top-4.
	if ids, _ := runRouter(t, logits, all, 4, 1, 0, 0.85); !slices.Equal(ids, []uint32{0, 1, 2, 3}) {
		t.Errorf("all resident: ids %v, want the true top-4", ids)
	}
	// Experts 0, 2 and 3 not resident. Scores (∝ e^logit, ×λ when missing):
	// 1: 49.4, 4: 38.5, 2: 44.7·0.85 = 38.0, 5: 36.6, 3: 40.4·0.85 = 34.4; rank
	// 0 is protected whatever its residency. So 4 takes 3's place.
	res := []uint32{0, 1, 0, 0, 1, 1, 1, 1}
	ids, w := runRouter(t, logits, res, 4, 1, 0, 0.85)
	if !slices.Equal(ids, []uint32{0, 1, 4, 2}) {
		t.Errorf("MoCE: ids %v, want [0 1 4 2]", ids)
	}
	// A stronger pull (λ = 0.5: 2 → 22.3, 3 → 20.2): both residents come in.
	if ids, _ := runRouter(t, logits, res, 4, 1, 0, 0.5); !slices.Equal(ids, []uint32{0, 1, 4, 5}) {
		t.Errorf("λ = 0.5: ids %v, want [0 1 4 5]", ids)
	}
	// The weights are the chosen experts' true probabilities, renormalised.
	var z float64
	for _, e := range ids {
		z += math.Exp(float64(logits[e]))
	}
	for j, e := range ids {
		if want := math.Exp(float64(logits[e])) / z; math.Abs(float64(w[j])-want) > 1e-6 {
			t.Errorf("weight of expert %d: %.6f, want %.6f", e, w[j], want)
		}
	}
	// The max-rank cap: with M = 4 the residents at ranks 4 and 5 may not
	// come in, whatever λ: the true top-4 stands.
	if ids, _ := runRouter(t, logits, res, 4, 1, 4, 0.5); !slices.Equal(ids, []uint32{0, 1, 2, 3}) {
		t.Errorf("M = 4: ids %v, want [0 1 2 3]", ids)
	}
	// A resident far down (rank 6, probability e^-2.7 of the top) never beats
	// a missing rank-2 expert at λ = 0.85.
	res2 := []uint32{1, 1, 0, 1, 1, 1, 1, 1}
	if ids, _ := runRouter(t, []float32{4, 3.9, 3.8, 3.7, 3.65, 1, 1.1, 0.5}, res2, 4, 1, 0, 0.85); !slices.Equal(ids, []uint32{0, 1, 3, 4}) {
		t.Errorf("ids %v, want [0 1 3 4]", ids)
	}
}
