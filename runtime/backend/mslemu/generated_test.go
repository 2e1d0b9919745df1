package mslemu_test

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/weights"

	_ "github.com/strata-llm/strata/generated/q4-a"
	_ "github.com/strata-llm/strata/generated/qwen3-next-80b-a3b"
	_ "github.com/strata-llm/strata/generated/qwen38-flash-next"
	_ "github.com/strata-llm/strata/generated/tiny-a"
	_ "github.com/strata-llm/strata/generated/tiny-go"
	_ "github.com/strata-llm/strata/generated/tiny-k512"
)

// TestGeneratedModelsBuild: every checked-in kernels.metal compiles with the
// harness written from its bindings' metadata (a signature, slot or constant
// that disagrees fails), and no kernel needs more threadgroup memory than an
// Apple GPU has.
func TestGeneratedModelsBuild(t *testing.T) {
	requireClang(t)
	names := artifact.Names()
	if len(names) < 6 {
		t.Fatalf("registered models %v", names)
	}
	for _, name := range names {
		m, err := artifact.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		e, err := mslemu.New(m, mslemu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		e.Close()
	}
}

// TestGeneratedWindows: the checked-in window graphs and kernels of tiny-a
// and q4-a (through artifact, as a GPU backend loads them) over the
// oracle checkpoints give the cpu backend's logits (prefill in the 16-row
// shape with 13 rows live, then decode rows) and the same greedy tokens.
func TestGeneratedWindows(t *testing.T) {
	requireClang(t)
	for _, name := range []string{"tiny-a", "q4-a"} {
		t.Run(name, func(t *testing.T) {
			m, err := artifact.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			c, err := models.Embedded(name)
			if err != nil {
				t.Fatal(err)
			}
			var graphs []*graph.Graph
			for _, rows := range m.Shapes(graph.KindTrunk) {
				g, err := m.Graph(graph.KindTrunk, rows)
				if err != nil {
					t.Fatal(err)
				}
				graphs = append(graphs, g)
			}
			ck, err := safetensors.OpenDir(filepath.Join("../../../testdata/oracles", name))
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			e, err := mslemu.New(m, mslemu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			prompt := []int{426, 50, 257, 220, 142, 108, 137, 389, 319, 31, 51, 81, 507}
			run := func(b backend.Backend) ([]int, [][]float32) {
				mod, err := engine.LoadWith(c, graphs, weights.NewHF(ck, c), b)
				if err != nil {
					t.Fatal(err)
				}
				var logits [][]float32
				out, err := mod.NewSession().Generate(prompt, 6, engine.GenerateOptions{PrefillRows: 16, OnLogits: func(r []float32) error {
					logits = append(logits, r)
					return nil
				}})
				if err != nil {
					t.Fatal(err)
				}
				return out, logits
			}
			wantTokens, want := run(cpu.Backend)
			gotTokens, got := run(e)
			if !slices.Equal(gotTokens, wantTokens) {
				t.Errorf("greedy tokens %v, the cpu backend's %v", gotTokens, wantTokens)
			}
			if len(got) != len(want) {
				t.Fatalf("%d logit rows, the cpu backend gave %d", len(got), len(want))
			}
			worst := 0.0
			for i := range want {
				var d, n float64
				for j := range want[i] {
					e := float64(got[i][j]) - float64(want[i][j])
					d += e * e
					n += float64(want[i][j]) * float64(want[i][j])
				}
				rel := math.Sqrt(d / n)
				worst = max(worst, rel)
				if !(rel <= 1e-5) {
					t.Errorf("logit row %d: relative L2 %.3g from the cpu backend's", i, rel)
				}
			}
			t.Logf("worst relative L2 from the cpu backend: %.3g", worst)
		})
	}
}
