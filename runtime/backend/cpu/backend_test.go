package cpu

import (
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// otherMemory is a backend.Memory that is not the cpu backend's.
type otherMemory struct{ backend.Memory }

// The cpu backend under the contract: memory from NewMemory, a program that
// runs (y = x·wᵀ of a hand-made 2×3 weight: the first two columns of x) and
// takes another dispatch order, and a refusal of any other memory.
func TestBackendContract(t *testing.T) {
	r := func(buf string, off, size int64) graph.Range {
		return graph.Range{Buffer: buf, Offset: off, Size: size}
	}
	g := &graph.Graph{Model: "contract-test", Kind: graph.KindTrunk, Rows: 2, Buffers: []graph.Buffer{
		{Name: "params", Kind: graph.KindParams, Size: 64}, {Name: "act", Kind: graph.KindScratch, Size: 1024},
		{Name: "weights", Kind: graph.KindWeights, Size: 64},
	}, Tensors: []graph.Tensor{{Name: "layers.0.attn.o", Buffer: "weights", Offset: 0, Format: "f32", Shape: []int{2, 3}}}}
	g.Dispatches = []graph.Dispatch{{Kernel: "matmul", Family: "matmul",
		Consts: []graph.Const{{Name: "rows", Value: 2}, {Name: "n", Value: 2}, {Name: "k", Value: 3}, {Name: "wfmt", Value: 0}},
		Args: []graph.Binding{{Name: "params", Access: graph.Read, Range: r("params", 0, 64)}, {Name: "w", Access: graph.Read, Range: r("weights", 0, 24)},
			{Name: "x", Access: graph.Read, Range: r("act", 0, 24)}, {Name: "y", Access: graph.Write, Range: r("act", 512, 16)}}}}
	mem, err := Backend.NewMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mem.(backend.MappedMemory); !ok {
		t.Fatalf("cpu memory %T cannot wrap mapped weights, but the backend says InPlaceWeights", mem)
	}
	backend.Uint32s(mem.Buffer("params"))[0] = 2 // two live rows
	copy(backend.Float32s(mem.Buffer("weights")), []float32{1, 0, 0, 0, 1, 0})
	copy(backend.Float32s(mem.Buffer("act")), []float32{1, -2, 3, 0.5, 4, -1})
	p, err := Backend.Compile(g, mem)
	if err != nil {
		t.Fatal(err)
	}
	o, ok := p.(backend.Ordered)
	if !ok {
		t.Fatalf("cpu program %T cannot change its order", p)
	}
	for _, order := range []backend.Order{backend.Serial, backend.Shuffled, backend.Concurrent} {
		clear(mem.Buffer("act")[512:528])
		o.SetOrder(order, 1)
		if err := p.Run(); err != nil {
			t.Fatal(err)
		}
		if got := backend.Float32s(mem.Buffer("act")[512:528]); !slices.Equal(got, []float32{1, -2, 0.5, 4}) {
			t.Errorf("order %d: y = %v, want [1 -2 0.5 4]", order, got)
		}
	}
	if _, err := Backend.Compile(g, otherMemory{mem}); err == nil || !strings.Contains(err.Error(), "not the cpu backend's") {
		t.Errorf("compiling over another backend's memory: err %v", err)
	}
}
