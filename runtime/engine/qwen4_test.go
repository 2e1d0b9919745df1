package engine_test

import (
	"math"
	"testing"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// loadQ4 loads the q4-a oracle over graphs edited by edit, prefill in
// windows of up to 80 rows.
func loadQ4(t *testing.T, edit func(*graph.Graph)) *engine.Model {
	return e2e.LoadEdited(t, "q4-a", 80, edit)
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
	ref := e2e.Ref(t, "q4-a")
	sparse := feed(t, loadQ4(t, func(*graph.Graph) {}), ref.Tokens, 80)
	dense := feed(t, loadQ4(t, func(g *graph.Graph) {
		for i := range g.Dispatches {
			for j, c := range g.Dispatches[i].Consts {
				if g.Dispatches[i].Family == "attention" && c.Name == "sparse" {
					g.Dispatches[i].Consts[j].Value = 0
				}
			}
		}
	}), ref.Tokens, 80)
	const firstSparse = 19 // 20 visible tokens = 5 complete blocks > 4
	worst := 0.0
	for i := range ref.Tokens {
		if e := e2e.RelL2(sparse[i], ref.Logits[i]); e > 1e-4 {
			t.Errorf("position %d: sparse attention is %.3g from the reference", i, e)
		}
		d := e2e.RelL2(dense[i], ref.Logits[i])
		if i < firstSparse && d > 1e-6+e2e.RelL2(sparse[i], ref.Logits[i]) {
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
	ref := e2e.Ref(t, "q4-a")
	if ref.Tokens[37] != 3 {
		t.Fatalf("reference token 37 is %d, want the EOS (3)", ref.Tokens[37])
	}
	m := loadQ4(t, func(*graph.Graph) {})
	for _, split := range []int{37, 38, 39} {
		s := m.NewSession()
		var got [][]float32
		for _, part := range [][]int{ref.Tokens[:split], ref.Tokens[split:]} {
			rows, err := s.Window(part)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
		}
		for i := 30; i < len(ref.Tokens); i++ {
			if e := e2e.RelL2(got[i], ref.Logits[i]); e > 1e-4 {
				t.Errorf("windows split at %d: position %d is %.3g from the reference", split, i, e)
			}
		}
	}
}

func TestMTPHead(t *testing.T) {
	ref := e2e.Ref(t, "q4-a")
	l, err := load.HF(e2e.WithMTP(t), e2e.WithGenerator(load.Options{AllLogits: true, PrefillRows: 8}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Model.HasMTP() {
		t.Fatal("the MTP head did not load")
	}
	toks := ref.Tokens[:9]

	// The trunk is untouched by the head: its logits still match the reference.
	whole := l.Model.NewSession()
	trunk, err := whole.Window(toks[:8])
	if err != nil {
		t.Fatal(err)
	}
	for i := range trunk {
		if e := e2e.RelL2(trunk[i], ref.Logits[i]); e > 1e-4 {
			t.Fatalf("trunk position %d: %.3g from the reference with the MTP head loaded", i, e)
		}
	}
	// Head over the 8 rows at once: row i drafts the token after toks[i+1].
	drafts, err := whole.MTPWindow(toks[1:9], 0)
	if err != nil {
		t.Fatal(err)
	}
	// The same rows one window at a time: the head's caches carry the context.
	step := l.Model.NewSession()
	for i := 0; i < 8; i++ {
		if _, err := step.Window(toks[i : i+1]); err != nil {
			t.Fatal(err)
		}
		got, err := step.MTPWindow(toks[i+1:i+2], i)
		if err != nil {
			t.Fatal(err)
		}
		if e := e2e.RelL2(got[0], drafts[i]); e > 1e-5 {
			t.Errorf("MTP row %d: one-row windows differ from one 8-row window by %.3g", i, e)
		}
		for _, v := range got[0] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("MTP row %d: non-finite logit", i)
			}
		}
	}
}
