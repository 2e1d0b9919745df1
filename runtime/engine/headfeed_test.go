package engine_test

import (
	"slices"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/spec"
	"github.com/strata-llm/strata/runtime/load"
)

// skipWindows skips the head after windows [2, 7) and [9, 20): a catch-up
// of one MTP window (5 windows' rows plus the resuming one's) and one of
// several (more rows than the largest MTP window, 64).
func skipWindows(w int) bool { return w >= 2 && w < 7 || w >= 9 && w < 20 }

// A head that skipped windows and caught up gives the logits of one that
// never skipped: bit for bit those of TeacherForced (a head fed after every
// window), and within tiny-go's bound of the float64 reference's MTP rows.
// The rows checked are those of the catch-up windows and of the windows
// after them, whose attention reads the caught-up caches.
func TestHeadCatchUpTinyGo(t *testing.T) {
	ref := e2e.LoadTinyGoRef(t)
	l, err := load.HF(e2e.TinyGoDir(), e2e.WithGenerator(load.Options{AllLogits: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const rows = 8
	_, eager, err := l.Model.TeacherForced(ref.Tokens, rows)
	if err != nil {
		t.Fatal(err)
	}
	lazy, caughtUp, err := engine.TeacherForcedSkipping(l.Model, ref.Tokens, rows, skipWindows)
	if err != nil {
		t.Fatal(err)
	}
	if caughtUp != 16*rows {
		t.Fatalf("caught up %d rows, want %d", caughtUp, 16*rows)
	}
	checkSameRows(t, lazy, eager)
	var got, want [][]float32
	var at []int
	for i, p := range ref.MTPPosition {
		if lazy[p] != nil && p >= 2*rows {
			got, want, at = append(got, lazy[p]), append(want, ref.MTPLogits[i]), append(at, p)
		}
	}
	if len(at) < 20 {
		t.Fatalf("only %d reference rows after a skip were computed", len(at))
	}
	worst := e2e.CheckAbs(t, "mtp after a catch-up", got, want, at, e2e.TinyGoAbsTol)
	t.Logf("%d reference rows after a skip, worst |logit − reference| %.3g", len(at), worst)
}

// checkSameRows compares every row the lazy head computed with the eager
// head's, bit for bit.
func checkSameRows(t *testing.T, lazy, eager [][]float32) {
	t.Helper()
	n := 0
	for p, r := range lazy {
		if r == nil {
			continue
		}
		n++
		if !slices.Equal(r, eager[p]) {
			t.Fatalf("MTP row at position %d differs from a head that never skipped", p)
		}
	}
	if n == 0 {
		t.Fatal("no MTP rows computed")
	}
}

// The same on q4-a with an MTP head (e2e.WithMTP: QSA, PLE and
// hyper-connections in the trunk), against the eager head only: it has no
// MTP reference.
func TestHeadCatchUpQ4(t *testing.T) {
	l, err := load.HF(e2e.WithMTP(t), e2e.WithGenerator(load.Options{AllLogits: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ref := e2e.Ref(t, "q4-a")
	tokens := ref.Tokens
	for len(tokens) < 200 {
		tokens = append(tokens, ref.Tokens...)
	}
	const rows = 8
	_, eager, err := l.Model.TeacherForced(tokens, rows)
	if err != nil {
		t.Fatal(err)
	}
	lazy, _, err := engine.TeacherForcedSkipping(l.Model, tokens, rows, skipWindows)
	if err != nil {
		t.Fatal(err)
	}
	checkSameRows(t, lazy, eager)
}

// Decoding with the head skipping and resuming (drafts only from the
// windows after which it ran) gives plain decoding's tokens and logits, bit
// for bit, at fixed depths and under the gate (priced so that it drafts),
// on tiny-go and on q4-a with an MTP head. tiny-go runs windows of up to 3
// rows: its 4-row windows' logits differ from plain decoding's by up to
// 4e-6 whatever the head does (the trunk's kernels at T=4).
func TestHeadSkippingIsExact(t *testing.T) {
	q4, err := load.HF(e2e.WithMTP(t), e2e.WithGenerator(load.Options{AllLogits: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer q4.Close()
	tiny, err := load.HF(e2e.TinyGoDir(), e2e.WithGenerator(load.Options{AllLogits: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer tiny.Close()
	for _, m := range []struct {
		name     string
		l        *load.Loaded
		prompt   []int
		maxDepth int
	}{{"tiny-go", tiny, e2e.LoadTinyGoRef(t).Greedy[:16], 2}, {"q4-a", q4, e2e.Ref(t, "q4-a").Tokens[:16], 3}} {
		decode := func(sp engine.SpecOptions, run func(step, pending int) bool) ([]int, [][]float32) {
			t.Helper()
			if run != nil {
				defer engine.SetHeadSchedule(run)()
			}
			var logits [][]float32
			out, err := m.l.Model.NewSession().Generate(m.prompt, 40, engine.GenerateOptions{PrefillRows: 4, IgnoreEOS: true, Spec: sp,
				OnLogits: func(r []float32) error { logits = append(logits, r); return nil }})
			if err != nil {
				t.Fatal(err)
			}
			return out, logits
		}
		want, wantLogits := decode(engine.SpecOptions{}, nil)
		// The head runs after the prompt, skips from the 4th token to the
		// 12th and from the 20th to the 32nd, runs otherwise.
		schedule := func(step, pending int) bool { return step < 4 || step >= 12 && step < 20 || step >= 32 }
		for _, depth := range []int{1, m.maxDepth, engine.Auto} {
			st := &engine.SpecStats{}
			sp := engine.SpecOptions{Depth: depth, MTP: true, Stats: st}
			if depth == engine.Auto {
				sp.Gate = spec.NewGate(m.maxDepth)
				sp.Gate.Costs = func(n int) float64 { return 1 + 0.1*float64(n-1) }
			}
			got, gotLogits := decode(sp, schedule)
			if !slices.Equal(got, want) {
				t.Fatalf("%s, depth %d: tokens %v, plain decoding %v", m.name, depth, got, want)
			}
			if len(gotLogits) != len(wantLogits) {
				t.Fatalf("%s, depth %d: %d logit rows, want %d", m.name, depth, len(gotLogits), len(wantLogits))
			}
			for i := range wantLogits {
				if !slices.Equal(gotLogits[i], wantLogits[i]) {
					t.Fatalf("%s, depth %d: row %d logits differ from plain decoding", m.name, depth, i)
				}
			}
			// q4-a's head is a copy of a trunk layer: its drafts miss, and
			// every drafted window is re-run.
			if depth > 0 && st.Drafted == 0 || m.name == "tiny-go" && st.Accepted == 0 {
				t.Errorf("%s, depth %d: %d drafted, %d accepted", m.name, depth, st.Drafted, st.Accepted)
			}
			t.Logf("%s, depth %d: %d windows, %d drafted, %d accepted, %d MTP rows", m.name, depth, st.Windows, st.Drafted, st.Accepted, st.HeadRows)
		}
	}
}
