package cpu

import (
	"testing"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/tools/imatrix"
)

// TestObserverMatmul: a matmul over 2 live rows (of 3 allocated) reports
// exactly those rows under the weight tensor's name, and the collector's
// Σx² per column is the hand-computed one.
func TestObserverMatmul(t *testing.T) {
	r := func(buf string, off, size int64) graph.Range {
		return graph.Range{Buffer: buf, Offset: off, Size: size}
	}
	g := &graph.Graph{Model: "observe-test", Kind: graph.KindTrunk, Rows: 3, Buffers: []graph.Buffer{
		{Name: "params", Kind: graph.KindParams, Size: 64}, {Name: "act", Kind: graph.KindScratch, Size: 1024},
		{Name: "weights", Kind: graph.KindWeights, Size: 64},
	}, Tensors: []graph.Tensor{{Name: "layers.0.attn.o", Buffer: "weights", Offset: 0, Format: "f32", Shape: []int{2, 3}}}}
	g.Dispatches = []graph.Dispatch{{Kernel: "matmul", Family: "matmul",
		Consts: []graph.Const{{Name: "rows", Value: 3}, {Name: "n", Value: 2}, {Name: "k", Value: 3}, {Name: "wfmt", Value: 0}},
		Args: []graph.Binding{{Name: "params", Access: graph.Read, Range: r("params", 0, 64)}, {Name: "w", Access: graph.Read, Range: r("weights", 0, 24)},
			{Name: "x", Access: graph.Read, Range: r("act", 0, 36)}, {Name: "y", Access: graph.Write, Range: r("act", 512, 24)}}}}
	mem, err := backend.NewHostMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	backend.Uint32s(mem.Buffer("params"))[0] = 2 // two live rows
	copy(backend.Float32s(mem.Buffer("weights")), []float32{1, 0, 0, 0, 1, 0})
	copy(backend.Float32s(mem.Buffer("act")), []float32{1, -2, 3, 0.5, 4, -1, 100, 100, 100})
	p, err := Compile(g, mem)
	if err != nil {
		t.Fatal(err)
	}
	c := imatrix.NewCollector()
	prev := SetObserver(c)
	p.Run()
	SetObserver(prev)
	p.Run() // not observed
	m, err := c.Matrix(func(n string) []imatrix.Target { return []imatrix.Target{{Name: "blk.0." + n}} })
	if err != nil {
		t.Fatal(err)
	}
	e, ok := m.Entries["blk.0.layers.0.attn.o"]
	if !ok || len(m.Entries) != 1 {
		t.Fatalf("entries %v, want the one matmul weight", m.Names())
	}
	// Σx²: 1+0.25, 4+16, 9+1 over 2 rows.
	want := []float32{1.25, 20, 10}
	for i, w := range want {
		if e.Sums[i] != w {
			t.Errorf("Σx² column %d = %v, want %v", i, e.Sums[i], w)
		}
	}
	if e.Cols != 3 || len(e.Counts) != 1 || e.Counts[0] != 2 {
		t.Errorf("cols %d counts %v, want 3 and [2]", e.Cols, e.Counts)
	}
}
