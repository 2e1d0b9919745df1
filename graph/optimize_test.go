package graph

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func act(off, size int64) Range { return Range{Buffer: "act", Offset: off, Size: size} }

// op is a dispatch for hand-made graphs: a name, what it reads and writes.
func op(name string, reads, writes []Range) Dispatch {
	d := Dispatch{Kernel: name, Family: Family(name), Grid: [3]int{1, 1, 1}, Threadgroup: [3]int{32, 1, 1}, Reads: reads, Writes: writes}
	for _, r := range reads {
		d.Args = append(d.Args, Binding{Slot: len(d.Args), Name: "in", Access: Read, Range: r})
	}
	for _, w := range writes {
		d.Args = append(d.Args, Binding{Slot: len(d.Args), Name: "out", Access: Write, Range: w})
	}
	return d
}

func names(ds []Dispatch) []string {
	var out []string
	for _, d := range ds {
		s := d.Kernel
		if d.Barrier {
			s = "|" + s
		}
		out = append(out, s)
	}
	return out
}

func handGraph(ds ...Dispatch) *Graph {
	return &Graph{Model: "hand", Rows: 1, Buffers: []Buffer{
		{Name: "act", Kind: KindScratch, Size: 1024},
		{Name: "experts", Kind: KindExperts, Size: 1024},
	}, Dispatches: ds}
}

// Two independent chains written one after the other (q, its norm, k, its
// norm) need two barriers in that order and one once q and k share a group.
func TestReorderGroupsIndependentWork(t *testing.T) {
	g := handGraph(
		op("q", nil, []Range{act(0, 8)}),
		op("qnorm", []Range{act(0, 8)}, []Range{act(8, 8)}),
		op("k", nil, []Range{act(16, 8)}),
		op("knorm", []Range{act(16, 8)}, []Range{act(24, 8)}),
	)
	naive := slices.Clone(g.Dispatches)
	if n := PlaceBarriers(naive); n != 2 {
		t.Fatalf("generator order needs %d barriers, want 2", n)
	}
	if err := Optimize(g); err != nil {
		t.Fatal(err)
	}
	want := []string{"q", "k", "|qnorm", "knorm"}
	if got := names(g.Dispatches); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if b := LowerBound(g); b != 1 {
		t.Fatalf("lower bound %d, want 1", b)
	}
}

// The layer tail of an MoE block, written as the generator might: the routed
// experts right after the router, the shared expert last. Optimize keeps the
// router in front of the host point, moves the shared expert between the
// signal and the wait, and makes the routed experts wait. A dispatch before
// the router that neither the router nor the host needs moves past the
// signal too.
func TestReorderAroundHostPoint(t *testing.T) {
	xn, logits, ids, h, routed, shared, x, other := act(0, 64), act(64, 16), act(80, 8), act(96, 64), act(160, 64), act(224, 64), act(288, 64), act(352, 8)
	experts := Range{Buffer: "experts", Offset: 0, Size: 512}
	g := handGraph(
		op("norm", []Range{x}, []Range{xn}),
		op("router_mm", []Range{xn}, []Range{logits}),
		op("side", []Range{x}, []Range{other}), // needed by nothing before the wait
		op("router", []Range{logits}, []Range{ids}),
		op("gate_up", []Range{xn, ids, experts}, []Range{h}),
		op("down", []Range{h, ids, experts}, []Range{routed}),
		op("shared_up", []Range{xn}, []Range{act(416, 64)}),
		op("shared_down", []Range{act(416, 64)}, []Range{shared}),
		op("combine", []Range{routed, shared, x}, []Range{x}),
	)
	g.HostPoints = []HostPoint{{Layer: 0, After: 3}}
	if err := Optimize(g); err != nil {
		t.Fatal(err)
	}
	want := []string{"norm", "|router_mm", "|router", "side", "shared_up", "|shared_down", "gate_up", "|down", "|combine"}
	if got := names(g.Dispatches); !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if hp := g.HostPoints[0]; hp.After != 2 || hp.Wait != 6 {
		t.Fatalf("host point %+v, want after the router (2) and waiting before gate_up (6)", hp)
	}
}

// A host point whose next segment needs nothing from the host waits at the
// end of the window; Check accepts it and rejects waits out of place.
func TestHostPointWaitChecks(t *testing.T) {
	g := handGraph(
		op("router", nil, []Range{act(0, 8)}),
		op("after", []Range{act(8, 8)}, []Range{act(16, 8)}),
	)
	g.HostPoints = []HostPoint{{Layer: 0, After: 0}}
	if err := Optimize(g); err != nil {
		t.Fatal(err)
	}
	if g.HostPoints[0].Wait != 2 {
		t.Fatalf("wait %d, want 2 (nothing needs the host)", g.HostPoints[0].Wait)
	}
	if err := g.Check(); err != nil {
		t.Fatal(err)
	}
	g.HostPoints[0].Wait = 3
	if err := g.Check(); err == nil {
		t.Fatal("a wait past the end passed Check")
	}
	g.HostPoints = []HostPoint{{After: 1}, {After: 1}}
	if err := Optimize(g); err == nil || !strings.Contains(err.Error(), "host point 1") {
		t.Fatalf("two host points after one dispatch: %v", err)
	}
}

func TestGuardThreadsPerThreadgroup(t *testing.T) {
	g := handGraph(op("fine", nil, []Range{act(0, 8)}), op("too_wide", nil, []Range{act(8, 8)}))
	g.Dispatches[1].Threadgroup = [3]int{32, 64, 1}
	g.Dispatches[1].Layer = 7
	err := Optimize(g)
	var ge *GuardError
	if !errors.As(err, &ge) || ge.Dispatch != 1 || ge.Kernel != "too_wide" {
		t.Fatalf("error %v, want a guard error naming dispatch 1 (too_wide)", err)
	}
	for _, want := range []string{"dispatch 1 (too_wide, layer 7)", "2048 threads", "1024"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestGuardBindings(t *testing.T) {
	var reads []Range
	for i := range 32 {
		reads = append(reads, act(int64(8*i), 8))
	}
	g := handGraph(op("wide", reads, nil))
	if err := Optimize(g); err == nil || !strings.Contains(err.Error(), "dispatch 0 (wide") || !strings.Contains(err.Error(), "32 buffer bindings") {
		t.Fatalf("32 bindings: %v", err)
	}
	// 30 bindings and scalars: the argument struct takes the 31st slot.
	g = handGraph(op("fits", reads[:30], nil))
	g.Dispatches[0].Scalars = []Scalar{{Name: "eps", Value: 1e-6}}
	if err := Optimize(g); err != nil {
		t.Fatal(err)
	}
	g = handGraph(op("full", reads[:31], nil))
	g.Dispatches[0].Scalars = []Scalar{{Name: "eps", Value: 1e-6}}
	if err := Optimize(g); err == nil || !strings.Contains(err.Error(), "argument struct") {
		t.Fatalf("31 bindings and scalars: %v", err)
	}
}

func TestGuardEmptyGrid(t *testing.T) {
	g := handGraph(op("empty", nil, []Range{act(0, 8)}))
	g.Dispatches[0].Grid = [3]int{0, 1, 1}
	if err := Optimize(g); err == nil || !strings.Contains(err.Error(), "dispatch 0 (empty") {
		t.Fatalf("empty grid: %v", err)
	}
}

// A grid past 2^25 threadgroups is split into chunks that cover it exactly,
// each with its offset, and a host point after it moves to the last chunk.
func TestChunkOversizedGrid(t *testing.T) {
	g := handGraph(
		op("big", nil, []Range{act(0, 8)}),
		op("after", []Range{act(0, 8)}, []Range{act(8, 8)}),
	)
	g.Dispatches[0].Grid = [3]int{1 << 13, 1 << 13, 1} // 2^26 threadgroups
	g.HostPoints = []HostPoint{{After: 0}}
	if err := Optimize(g); err != nil {
		t.Fatal(err)
	}
	if len(g.Dispatches) != 3 {
		t.Fatalf("%d dispatches, want big in 2 chunks and after", len(g.Dispatches))
	}
	for c, wantY := range []int{0, 1 << 12} {
		d := g.Dispatches[c]
		off, chunked := d.GridOffset()
		if !chunked || off != [3]int{0, wantY, 0} || d.Grid != [3]int{1 << 13, 1 << 12, 1} {
			t.Errorf("chunk %d: grid %v offset %v (chunked %v), want [8192 4096 1] at y %d", c, d.Grid, off, chunked, wantY)
		}
	}
	if g.HostPoints[0].After != 1 {
		t.Errorf("host point after dispatch %d, want the last chunk (1)", g.HostPoints[0].After)
	}
}

// Chunks cover every threadgroup of the original grid exactly once, whatever
// the shape and the limit.
func TestChunksCoverTheGrid(t *testing.T) {
	for _, c := range []struct {
		grid  [3]int
		limit int64
	}{
		{[3]int{10, 1, 1}, 3}, {[3]int{5, 7, 3}, 8}, {[3]int{5, 7, 3}, 35}, {[3]int{4, 1, 9}, 5}, {[3]int{7, 3, 2}, 1},
	} {
		g := handGraph(op("d", nil, []Range{act(0, 8)}))
		g.Dispatches[0].Grid = c.grid
		ChunkGrids(g, Limits{MaxThreadgroupsPerGrid: c.limit})
		covered := map[[3]int]int{}
		for _, d := range g.Dispatches {
			if gridSize(d.Grid) > c.limit {
				t.Errorf("grid %v limit %d: chunk %v too large", c.grid, c.limit, d.Grid)
			}
			off, _ := d.GridOffset()
			for x := range d.Grid[0] {
				for y := range d.Grid[1] {
					for z := range d.Grid[2] {
						covered[[3]int{off[0] + x, off[1] + y, off[2] + z}]++
					}
				}
			}
		}
		if int64(len(covered)) != gridSize(c.grid) {
			t.Errorf("grid %v limit %d: %d threadgroups covered", c.grid, c.limit, len(covered))
		}
		for tg, n := range covered {
			if n != 1 || tg[0] >= c.grid[0] || tg[1] >= c.grid[1] || tg[2] >= c.grid[2] {
				t.Errorf("grid %v limit %d: threadgroup %v covered %d times", c.grid, c.limit, tg, n)
			}
		}
	}
}

func TestICBPlan(t *testing.T) {
	g := handGraph(
		op("a", nil, []Range{act(0, 8)}),
		op("router", []Range{act(0, 8)}, []Range{act(8, 8)}),
		op("shared", []Range{act(0, 8)}, []Range{act(16, 8)}),
		op("expert", []Range{act(8, 8), {Buffer: "experts", Size: 8}}, []Range{act(24, 8)}),
		op("far", nil, []Range{act(32, 8)}),
		op("tail", []Range{act(24, 8)}, []Range{act(40, 8)}),
	)
	g.Dispatches[0].Scalars = []Scalar{{Name: "eps", Value: 1e-6}, {Name: "theta", Value: 1e4}}
	g.Dispatches[2].Scalars = []Scalar{{Name: "eps", Value: 1e-6}}
	g.HostPoints = []HostPoint{{After: 1}}
	g.Buffers = append(g.Buffers, Buffer{Name: "huge", Kind: KindWeights, Size: 1 << 33})
	g.Dispatches[4].Args = append(g.Dispatches[4].Args, Binding{Slot: 1, Name: "w", Access: Read, Range: Range{Buffer: "huge", Offset: 1 << 32, Size: 4}})
	if err := Optimize(g); err != nil {
		t.Fatal(err)
	}
	// The plan is over the optimized order.
	if got, want := names(g.Dispatches), []string{"a", "|router", "shared", "far", "|expert", "|tail"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if hp := g.HostPoints[0]; hp.After != 1 || hp.Wait != 4 {
		t.Fatalf("host point %+v", hp)
	}
	p := g.ICB
	if p.Commands[3].Replay || !strings.Contains(p.Commands[3].Reason, "binding w") {
		t.Errorf("a binding at 2^32 replays: %+v", p.Commands[3])
	}
	wantRuns := []ICBRun{{First: 0, Count: 2}, {First: 2, Count: 1}, {First: 4, Count: 2}}
	if !slices.Equal(p.Runs, wantRuns) {
		t.Errorf("runs %+v, want %+v (cut at the far binding, the signal and the wait)", p.Runs, wantRuns)
	}
	for i, c := range p.Commands {
		if c.Barrier != g.Dispatches[i].Barrier {
			t.Errorf("command %d barrier bit %v, dispatch barrier %v", i, c.Barrier, g.Dispatches[i].Barrier)
		}
	}
	if a := p.Commands[0].Args; a == nil || *a != (ICBArgs{Slot: 1, Offset: 0, Size: 8}) {
		t.Errorf("args of a: %+v", a)
	}
	if a := p.Commands[2].Args; a == nil || *a != (ICBArgs{Slot: 2, Offset: 16, Size: 4}) {
		t.Errorf("args of shared: %+v", a)
	}
	if p.ArgsSize != 32 || len(p.PatchPerStep) != 0 {
		t.Errorf("args size %d, patched %v", p.ArgsSize, p.PatchPerStep)
	}
}

// The audit's layers add up to its totals, and the JSON form has the fields
// the CLI documents.
func TestAuditTotalsAndJSON(t *testing.T) {
	g := handGraph(
		op("q", nil, []Range{act(0, 8)}),
		op("qnorm", []Range{act(0, 8)}, []Range{act(8, 8)}),
		op("k", nil, []Range{act(16, 8)}),
		op("knorm", []Range{act(16, 8)}, []Range{act(24, 8)}),
		op("out", []Range{act(8, 8), act(24, 8)}, []Range{act(32, 8)}),
	)
	for i := range g.Dispatches {
		g.Dispatches[i].Layer = i / 2
	}
	if err := Optimize(g); err != nil {
		t.Fatal(err)
	}
	a := NewAudit(g)
	if a.Dispatches != 5 || a.Barriers != 2 || a.BarriersNaive != 4 || a.BarrierLowerBound != 2 || a.CriticalPath != 3 || a.BytesRead != 32 || a.BytesWritten != 40 {
		t.Fatalf("audit %+v", a.Counts)
	}
	var sum Counts
	for _, l := range a.Layers {
		sum.Dispatches += l.Dispatches
		sum.Barriers += l.Barriers
		sum.BarriersNaive += l.BarriersNaive
		sum.BarrierLowerBound += l.BarrierLowerBound
		sum.BytesRead += l.BytesRead
		sum.BytesWritten += l.BytesWritten
	}
	if sum.Dispatches != a.Dispatches || sum.Barriers != a.Barriers || sum.BarriersNaive != a.BarriersNaive ||
		sum.BarrierLowerBound != a.BarrierLowerBound || sum.BytesRead != a.BytesRead || sum.BytesWritten != a.BytesWritten {
		t.Errorf("layers add up to %+v, totals are %+v", sum, a.Counts)
	}
	j, err := a.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(j, &obj); err != nil {
		t.Fatal(err)
	}
	fields := []string{"model", "rows", "dispatches", "barriers", "barriers_naive", "barrier_lower_bound", "host_points", "bytes_read", "bytes_written", "critical_path"}
	for _, f := range append(fields, "layers") {
		if _, ok := obj[f]; !ok {
			t.Errorf("audit JSON lacks %q", f)
		}
	}
	layer := obj["layers"].([]any)[0].(map[string]any)
	for _, f := range fields[2:] {
		if _, ok := layer[f]; !ok {
			t.Errorf("layer JSON lacks %q", f)
		}
	}
	var text strings.Builder
	if err := a.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "barriers: 2 placed, 4 naive, 2 lower bound") {
		t.Errorf("text form:\n%s", text.String())
	}
}
