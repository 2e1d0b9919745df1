package cpu_test

import (
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/load"
)

// The cpu backend's end-to-end suite: through runtime/load, the oracles'
// float64 HF references (testdata/oracles) and tiny-go's.

// TestOracleLogits: a full prefill of the reference tokens (one window) and of
// the greedy path reproduces the float64 HF logits.
func TestOracleLogits(t *testing.T) {
	for _, o := range e2e.Oracles {
		t.Run(o.Name, func(t *testing.T) {
			ref := e2e.Ref(t, o.Name)
			l, _ := e2e.OpenOracle(t, o.Name, load.Options{AllLogits: true, PrefillRows: len(ref.Tokens)})
			w1 := e2e.CheckLogits(t, "tokens", e2e.RunLogits(t, l, ref.Tokens, len(ref.Tokens)), ref.Logits, o.Tol)
			w2 := e2e.CheckLogits(t, "greedy_tokens", e2e.RunLogits(t, l, ref.Greedy, len(ref.Greedy)), ref.GreedyLogits, o.Tol)
			t.Logf("worst per-position relative L2: tokens %.3g, greedy %.3g", w1, w2)
		})
	}
}

// TestOracleGreedy: prefill the 16-token prompt, then decode one row at a
// time; the tokens equal HF's cached greedy decode exactly and every fed
// token's logits match the full-forward reference.
func TestOracleGreedy(t *testing.T) {
	const prompt = 16
	for _, o := range e2e.Oracles {
		t.Run(o.Name, func(t *testing.T) {
			l, ref := e2e.OpenOracle(t, o.Name, load.Options{AllLogits: true})
			e2e.CheckGreedyDecode(t, l, ref, prompt, l.PrefillRows, o.Tol)
		})
	}
}

// TestPrefillWindowsAgree: the same tokens in one window, in windows of 5 rows
// and one row at a time give the same logits.
func TestPrefillWindowsAgree(t *testing.T) {
	for _, o := range e2e.Oracles {
		t.Run(o.Name, func(t *testing.T) {
			ref := e2e.Ref(t, o.Name)
			var base [][]float32
			for _, rows := range []int{len(ref.Tokens), 5, 1} {
				l, _ := e2e.OpenOracle(t, o.Name, load.Options{AllLogits: true, PrefillRows: rows})
				got := e2e.RunLogits(t, l, ref.Tokens, rows)
				if base == nil {
					base = got
					continue
				}
				for i := range base {
					if e := e2e.RelL2(got[i], base[i]); e > 1e-5 {
						t.Errorf("windows of %d rows, position %d: %.3g from the one-window logits", rows, i, e)
					}
				}
			}
		})
	}
}
