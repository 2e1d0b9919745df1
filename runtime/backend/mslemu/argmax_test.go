package mslemu_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
)

// TestArgmaxKernel: the argmax dispatch of a decode window, on the emulator
// and on the cpu backend, against answers derived by hand from the
// definition (the first index of the largest value; NaN never wins; ±Inf and
// NaN flag the row), with ties across threads, signed zeros and a row past
// the live rows that must stay untouched.
//
// tiny-a's vocabulary (512, read as float4), a larger one whose threads go
// round the unrolled float4 loop more than once, and one that is not a
// multiple of 4 (read one value at a time).
func TestArgmaxKernel(t *testing.T) {
	e2e.RequireEmulator(t)
	for _, vocab := range []int{512, 20480, 4099} {
		t.Run(fmt.Sprint(vocab), func(t *testing.T) { testArgmaxKernel(t, vocab) })
	}
}

func testArgmaxKernel(t *testing.T, vocab int) {
	c, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Architecture.VocabSize = vocab
	g, err := gen.Window(c, 4, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var d graph.Dispatch
	for _, x := range g.Dispatches {
		if x.Family == graph.FamilyArgmax {
			d = x
		}
	}
	if d.Family != graph.FamilyArgmax || g.LogitRows != 4 {
		t.Fatalf("the T=4 window has no argmax dispatch over 4 logits rows (logit rows %d)", g.LogitRows)
	}
	V := c.Architecture.VocabSize
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	negZero := float32(math.Copysign(0, -1))
	rows := [][]float32{make([]float32, V), make([]float32, V), make([]float32, V), make([]float32, V)}
	for i := range V {
		rows[0][i] = float32(i%97) / 100 // 0.96 at 96, 193, …: the first one wins
		rows[1][i] = -float32(i)         // 0 at index 0; a NaN at 3
		rows[2][i] = -1                  // −0 at 50 and +0 at 100: equal, the first wins
		rows[3][i] = float32(i)          // past the live rows
	}
	// A later largest value, repeated within the same float4 and, where the
	// row is long enough, in the same thread's next round (1024 threads).
	rows[0][V/2+1], rows[0][V/2+2], rows[0][V-2] = 0.99, 0.99, 0.99
	if V/2+1+4*1024 < V {
		rows[0][V/2+1+4*1024] = 0.99
	}
	rows[1][3] = nan
	rows[2][50], rows[2][100] = negZero, 0
	rows[2][V-1] = -inf
	want := []uint32{uint32(V/2 + 1), 0, 0, 1, 50, 1}
	am, err := gen.Kernels(c, []*graph.Graph{oneDispatch(g, d)})
	if err != nil {
		t.Fatal(err)
	}
	emu, err := mslemu.New(am, mslemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	one := oneDispatch(g, d)
	ref, err := backend.NewHostMemory(one)
	if err != nil {
		t.Fatal(err)
	}
	got, err := emu.NewMemory(one)
	if err != nil {
		t.Fatal(err)
	}
	logits, _ := d.Arg("logits")
	best, _ := d.Arg("best")
	for _, m := range []backend.Memory{ref, got} {
		b, _ := m.Bytes(logits.Range)
		for r, row := range rows {
			copy(backend.Float32s(b)[r*V:], row)
		}
		poison(m, best, "uint")
	}
	setParams(one, 3, 0, ref, got)
	cp, err := cpu.Compile(one, ref)
	if err != nil {
		t.Fatal(err)
	}
	cp.Run()
	ep, err := emu.Compile(one, got)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.Run(); err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string]backend.Memory{"cpu": ref, "mslemu": got} {
		b, _ := m.Bytes(best.Range)
		w := backend.Uint32s(b)
		for i, v := range want {
			if w[i] != v {
				t.Errorf("%s: row %d word %d is %d, want %d (rows' words %v)", name, i/2, i%2, w[i], v, w[:6])
			}
		}
		if w[6] != 0xdeadbeef || w[7] != 0xdeadbeef {
			t.Errorf("%s: row 3 is past the live rows but was written: %#x %#x", name, w[6], w[7])
		}
	}
}
