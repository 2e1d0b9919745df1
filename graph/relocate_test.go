package graph

import "testing"

func relocGraph() *Graph {
	w := func(off, size int64) Range { return Range{Buffer: "weights", Offset: off, Size: size} }
	act := Range{Buffer: "act", Offset: 0, Size: 64}
	return &Graph{
		Buffers: []Buffer{{Name: "weights", Kind: KindWeights, Size: 4096}, {Name: "act", Kind: KindScratch, Size: 64}},
		Tensors: []Tensor{{Name: "a", Buffer: "weights", Offset: 0}, {Name: "b", Buffer: "weights", Offset: 1024}, {Name: "c", Buffer: "weights", Offset: 2048}},
		Dispatches: []Dispatch{
			{Kernel: "k0", Args: []Binding{{Slot: 0, Name: "w", Access: Read, Range: w(1024, 512)}, {Slot: 1, Name: "y", Access: Write, Range: act}},
				Reads: []Range{w(1024, 512)}, Writes: []Range{act}},
			{Kernel: "k1", Args: []Binding{{Slot: 0, Name: "w", Access: Read, Range: w(2048+256, 128)}, {Slot: 1, Name: "y", Access: Write, Range: act}},
				Reads: []Range{w(2048+256, 128)}, Writes: []Range{act}},
			{Kernel: "k2", Args: []Binding{{Slot: 0, Name: "w", Access: Read, Range: w(0, 1024)}}, Reads: []Range{w(0, 1024)}},
		},
	}
}

// Moved tensors and every reference inside them follow the move, at the
// same offset within the range; others stay.
func TestRelocate(t *testing.T) {
	g := relocGraph()
	moves := []Move{
		{From: Range{Buffer: "weights", Offset: 0, Size: 1024}, To: Range{Buffer: "weights", Offset: 256, Size: 1024}},
		{From: Range{Buffer: "weights", Offset: 1024, Size: 1024}, To: Range{Buffer: "file0", Offset: 96, Size: 1024}},
		{From: Range{Buffer: "weights", Offset: 2048, Size: 512}, To: Range{Buffer: "file0", Offset: 8192, Size: 512}},
	}
	if err := Relocate(g, moves, []Buffer{{Name: "file0", Kind: KindMapped, Size: 16384}}); err != nil {
		t.Fatal(err)
	}
	want := []Tensor{{Name: "a", Buffer: "weights", Offset: 256}, {Name: "b", Buffer: "file0", Offset: 96}, {Name: "c", Buffer: "file0", Offset: 8192}}
	for i, tt := range g.Tensors {
		if tt.Name != want[i].Name || tt.Buffer != want[i].Buffer || tt.Offset != want[i].Offset {
			t.Errorf("tensor %d: %+v, want %+v", i, tt, want[i])
		}
	}
	for i, wr := range []Range{{"file0", 96, 512}, {"file0", 8192 + 256, 128}, {"weights", 256, 1024}} {
		d := g.Dispatches[i]
		if d.Args[0].Range != wr || d.Reads[0] != wr {
			t.Errorf("dispatch %d: binding %+v, reads %+v; want %+v", i, d.Args[0].Range, d.Reads[0], wr)
		}
	}
	if _, ok := g.Buffer("file0"); !ok {
		t.Error("the buffer moved to is not declared")
	}
}

// A reference across a moved range's edge, of a whole buffer something
// moved out of, or left outside every move in such a buffer is refused, and
// the graph is left as it was.
func TestRelocateRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(g *Graph)
	}{
		{"straddle", func(g *Graph) { g.Dispatches[0].Args[0].Range = Range{Buffer: "weights", Offset: 1000, Size: 100} }},
		{"whole buffer", func(g *Graph) { g.Dispatches[2].Args[0].Range = Range{Buffer: "weights"} }},
		{"outside", func(g *Graph) { g.Dispatches[1].Reads[0] = Range{Buffer: "weights", Offset: 3000, Size: 100} }},
	} {
		g := relocGraph()
		c.edit(g)
		before := g.Dispatches[0].Args[0].Range
		moves := []Move{
			{From: Range{Buffer: "weights", Offset: 0, Size: 1024}, To: Range{Buffer: "weights", Offset: 0, Size: 1024}},
			{From: Range{Buffer: "weights", Offset: 1024, Size: 1024}, To: Range{Buffer: "file0", Offset: 0, Size: 1024}},
			{From: Range{Buffer: "weights", Offset: 2048, Size: 512}, To: Range{Buffer: "file0", Offset: 1024, Size: 512}},
		}
		if err := Relocate(relocGraph(), moves, nil); err != nil {
			t.Fatalf("the unedited graph: %v", err)
		}
		err := Relocate(g, moves, []Buffer{{Name: "file0", Kind: KindMapped, Size: 4096}})
		if err == nil {
			t.Errorf("%s: relocated", c.name)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
		if g.Dispatches[0].Args[0].Range != before || g.Tensors[1].Buffer != "weights" || len(g.Buffers) != 2 {
			t.Errorf("%s: a refused relocation changed the graph", c.name)
		}
	}
}
