package strata

import (
	"path/filepath"
	"testing"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/safetensors"
	"github.com/strata-llm/strata/runtime/weights"
)

// loadQ4 loads the q4-a oracle over graphs edited by edit, prefill in
// windows of up to 80 rows.
func loadQ4(t *testing.T, edit func(*graph.Graph)) *engine.Model {
	t.Helper()
	c, err := models.Load("models/q4-a/model.toml")
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(filepath.Join("testdata/oracles", "q4-a"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	graphs, err := gen.Windows(c, true, 80)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range graphs {
		edit(g)
	}
	m, err := engine.Load(c, graphs, weights.NewHF(ck, c))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func feed(t *testing.T, m *engine.Model, tokens []int, rows int) [][]float32 {
	t.Helper()
	var got [][]float32
	_, err := m.NewSession().Generate(tokens, 0, engine.GenerateOptions{PrefillRows: rows, OnLogits: func(r []float32) error {
		got = append(got, r)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestQSASelectionDropsBlocks: q4-a's budget is 4 blocks of 4 tokens, so from
// position 19 on the indexer must drop blocks. Attending densely instead must
// leave the early positions unchanged and move later ones off the reference
// (so the sparse path that matches the reference really selects).
func TestQSASelectionDropsBlocks(t *testing.T) {
	ref := ref0(t, "q4-a")
	sparse := feed(t, loadQ4(t, func(*graph.Graph) {}), ref.tokens, 80)
	dense := feed(t, loadQ4(t, func(g *graph.Graph) {
		for i := range g.Dispatches {
			for j, c := range g.Dispatches[i].Consts {
				if g.Dispatches[i].Family == "attention" && c.Name == "sparse" {
					g.Dispatches[i].Consts[j].Value = 0
				}
			}
		}
	}), ref.tokens, 80)
	const firstSparse = 19 // 20 visible tokens = 5 complete blocks > 4
	worst := 0.0
	for i := range ref.tokens {
		if e := relL2(sparse[i], ref.logits[i]); e > 1e-4 {
			t.Errorf("position %d: sparse attention is %.3g from the reference", i, e)
		}
		d := relL2(dense[i], ref.logits[i])
		if i < firstSparse && d > 1e-6+relL2(sparse[i], ref.logits[i]) {
			t.Errorf("position %d: dense and sparse differ below the budget (%.3g)", i, d)
		}
		if i >= firstSparse {
			worst = max(worst, d)
		}
	}
	if worst < 1e-2 {
		t.Errorf("dense attention stays within %.3g of the reference past the budget: block selection is not exercised", worst)
	}
	t.Logf("dense attention past the budget: worst relative L2 %.3g from the reference", worst)
}

// TestNgramAcrossEOS: the reference sequence has an EOS at index 37. Windows
// that end exactly at the EOS and right after it carry the n-gram context
// across window boundaries; every row still matches the reference.
func TestNgramAcrossEOS(t *testing.T) {
	ref := ref0(t, "q4-a")
	if ref.tokens[37] != 3 {
		t.Fatalf("reference token 37 is %d, want the EOS (3)", ref.tokens[37])
	}
	m := loadQ4(t, func(*graph.Graph) {})
	for _, split := range []int{37, 38, 39} {
		s := m.NewSession()
		var got [][]float32
		for _, part := range [][]int{ref.tokens[:split], ref.tokens[split:]} {
			rows, err := s.Window(part)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
		}
		for i := 30; i < len(ref.tokens); i++ {
			if e := relL2(got[i], ref.logits[i]); e > 1e-4 {
				t.Errorf("windows split at %d: position %d is %.3g from the reference", split, i, e)
			}
		}
	}
}
