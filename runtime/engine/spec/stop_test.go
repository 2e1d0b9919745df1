package spec_test

import (
	"slices"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// Generation that stops inside a speculative window (OnToken's ErrStop at
// every position) leaves the session as plain decoding would: it has
// consumed the prompt and the returned tokens but the last, so continuing
// from it (the last token, the rest as History) gives the uninterrupted
// run's tokens and, bit for bit, its logits (tiny-a: GDN state, KV cache).
func TestSpeculationStopsCleanly(t *testing.T) {
	var prompt []int
	for range 5 {
		prompt = append(prompt, 11, 22, 33, 44)
	}
	const n = 32
	l, _ := e2e.OpenOracle(t, "tiny-a", load.Options{AllLogits: true})
	want, wantLogits := decode(t, l, prompt, n, engine.SpecOptions{})
	step := 1
	if testing.Short() {
		step = 5
	}
	for cut := 1; cut < n; cut += step {
		s := l.Model.NewSession()
		seen := 0
		st := &engine.SpecStats{}
		out, err := s.Generate(prompt, n, engine.GenerateOptions{PrefillRows: l.PrefillRows,
			Spec: engine.SpecOptions{Depth: 3, SuffixDraft: 3, Drafter: &knownDrafter{seq: append(slices.Clone(prompt), want...)}, Stats: st},
			OnToken: func(int) error {
				if seen++; seen == cut {
					return engine.ErrStop
				}
				return nil
			}})
		if err != nil || !slices.Equal(out, want[:cut]) {
			t.Fatalf("stop at %d: %v %v, want %v", cut, out, err, want[:cut])
		}
		if s.Pos() != len(prompt)+cut-1 {
			t.Fatalf("stop at %d: the session consumed %d tokens, want %d", cut, s.Pos(), len(prompt)+cut-1)
		}
		var logits [][]float32
		rest, err := s.Generate(out[cut-1:], n-cut, engine.GenerateOptions{PrefillRows: l.PrefillRows,
			History:  append(slices.Clone(prompt), out[:cut-1]...),
			OnLogits: func(r []float32) error { logits = append(logits, r); return nil }})
		if err != nil || !slices.Equal(rest, want[cut:]) {
			t.Fatalf("continuing after %d: %v %v, want %v", cut, rest, err, want[cut:])
		}
		for i, r := range logits {
			if !slices.Equal(r, wantLogits[len(prompt)+cut-1+i]) {
				t.Fatalf("continuing after %d: row %d's logits differ from the uninterrupted run's", cut, i)
			}
		}
		if cut == n/2 && (st.Accepted == 0 || st.Rerun == 0) {
			t.Errorf("%d drafts accepted and %d windows re-run before token %d: both must happen", st.Accepted, st.Rerun, cut)
		}
	}
}
