package spec_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/spec"
	"github.com/strata-llm/strata/runtime/load"
)

// decode runs a prompt through a fresh session and returns the tokens and
// every fed token's logits.
func decode(t *testing.T, l *load.Loaded, prompt []int, n int, sp engine.SpecOptions) ([]int, [][]float32) {
	t.Helper()
	var logits [][]float32
	out, err := l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{
		PrefillRows: l.PrefillRows, Spec: sp,
		OnLogits: func(r []float32) error { logits = append(logits, r); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, logits
}

// Speculation never changes the output: with suffix drafts at fixed depths
// and under the gate, the greedy tokens and every committed row's logits are
// those of plain decoding, bit for bit (rejected rows leave no trace).
func TestSpeculationIsExact(t *testing.T) {
	repetitive := []int{}
	for i := 0; i < 5; i++ {
		repetitive = append(repetitive, 11, 22, 33, 44)
	}
	type run struct {
		name string
		sp   engine.SpecOptions
	}
	runs := []run{{"suffix depth 1", engine.SpecOptions{Depth: 1, SuffixDraft: 3}}, {"suffix depth 3", engine.SpecOptions{Depth: 3, SuffixDraft: 3}},
		{"suffix auto", engine.SpecOptions{Depth: engine.Auto, SuffixDraft: 3}}}
	for _, name := range []string{"tiny-a", "tiny-k512"} {
		l, _ := e2e.OpenOracle(t, name, load.Options{AllLogits: true})
		want, wantLogits := decode(t, l, repetitive, 40, engine.SpecOptions{})
		for _, r := range runs {
			st := &engine.SpecStats{}
			r.sp.Stats = st
			got, gotLogits := decode(t, l, repetitive, 40, r.sp)
			if !slices.Equal(got, want) {
				t.Fatalf("%s, %s: tokens %v, plain decoding %v", name, r.name, got, want)
			}
			if len(gotLogits) != len(wantLogits) {
				t.Fatalf("%s, %s: %d logit rows, want %d", name, r.name, len(gotLogits), len(wantLogits))
			}
			for i := range wantLogits {
				if !slices.Equal(gotLogits[i], wantLogits[i]) {
					t.Fatalf("%s, %s: row %d logits differ from plain decoding", name, r.name, i)
				}
			}
			t.Logf("%s, %s: %d windows, %d drafted, %d accepted, %d re-run", name, r.name, st.Windows, st.Drafted, st.Accepted, st.Rerun)
		}
	}
}

// The same on q4-a with an MTP head (hyper-connections, QSA, PLE: every
// kind of state a rejected row could corrupt), drafting with the head, the
// suffix drafter, or both under the gate.
func TestSpeculationIsExactQ4(t *testing.T) {
	l, err := load.HF(e2e.WithMTP(t), e2e.WithGenerator(load.Options{AllLogits: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ref := e2e.Ref(t, "q4-a")
	prompt := append(append([]int(nil), ref.Tokens[:20]...), ref.Tokens[10:20]...) // repeats: suffix drafts hit
	want, wantLogits := decode(t, l, prompt, 40, engine.SpecOptions{})
	for _, sp := range []engine.SpecOptions{
		{Depth: 1, MTP: true}, {Depth: 3, MTP: true}, {Depth: 2, SuffixDraft: 3},
		{Depth: engine.Auto, MTP: true, SuffixDraft: 3},
	} {
		st := &engine.SpecStats{}
		sp.Stats = st
		name := fmt.Sprintf("depth %d, mtp %v, suffix %d", sp.Depth, sp.MTP, sp.SuffixDraft)
		got, gotLogits := decode(t, l, prompt, 40, sp)
		if !slices.Equal(got, want) {
			t.Fatalf("%s: tokens %v, plain decoding %v", name, got, want)
		}
		for i := range wantLogits {
			if !slices.Equal(gotLogits[i], wantLogits[i]) {
				t.Fatalf("%s: row %d logits differ from plain decoding", name, i)
			}
		}
		t.Logf("%s: %d windows, %d drafted, %d accepted, %d re-run", name, st.Windows, st.Drafted, st.Accepted, st.Rerun)
	}
}

// knownDrafter drafts the continuation it was told (a plain run's output),
// wrong at about one position in three (a fixed pseudo-random choice), so
// windows accept some drafts and reject others.
type knownDrafter struct {
	seq     []int // prompt followed by the plain output
	spoiled int
}

func (k *knownDrafter) Draft(hist []int, n int) ([]int, []float64) {
	var d []int
	var p []float64
	for i := len(hist); i < len(k.seq) && len(d) < n; i++ {
		tok := k.seq[i]
		if (uint32(i)*2654435761)>>16%3 == 0 {
			tok = (tok + 1) % 512
			k.spoiled++
		}
		d = append(d, tok)
		p = append(p, 0.9)
	}
	return d, p
}

// Exactness through both accepted and rejected drafts, on every model kind.
func TestSpeculationAcceptsAndRejects(t *testing.T) {
	for _, name := range []string{"tiny-a", "q4-a"} {
		l, _ := e2e.OpenOracle(t, name, load.Options{AllLogits: true})
		ref := e2e.Ref(t, name)
		prompt := ref.Tokens[:16]
		want, wantLogits := decode(t, l, prompt, 30, engine.SpecOptions{})
		for _, depth := range []int{1, 3, engine.Auto} {
			st := &engine.SpecStats{}
			dr := &knownDrafter{seq: append(append([]int(nil), prompt...), want...)}
			var gate *spec.Gate
			if depth == engine.Auto {
				// Windows priced so that drafting pays: on the cpu backend a
				// 2-row window costs twice a plain one, so a gate that
				// measures declines, and neither path would be exercised.
				gate = spec.NewGate(3)
				gate.Costs = func(n int) float64 { return 1 + 0.1*float64(n-1) }
			}
			got, gotLogits := decode(t, l, prompt, 30, engine.SpecOptions{Depth: depth, SuffixDraft: 3, Drafter: dr, Stats: st, Gate: gate})
			if !slices.Equal(got, want) {
				t.Fatalf("%s, depth %d: tokens %v, plain decoding %v", name, depth, got, want)
			}
			for i := range wantLogits {
				if !slices.Equal(gotLogits[i], wantLogits[i]) {
					t.Fatalf("%s, depth %d: row %d logits differ from plain decoding", name, depth, i)
				}
			}
			if st.Accepted == 0 || st.Rerun == 0 {
				t.Errorf("%s, depth %d: %d accepted, %d re-run windows: both paths must be exercised", name, depth, st.Accepted, st.Rerun)
			}
			t.Logf("%s, depth %d: %d windows, %d drafted, %d accepted, %d re-run", name, depth, st.Windows, st.Drafted, st.Accepted, st.Rerun)
		}
	}
}
