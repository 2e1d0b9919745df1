package eval

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/reftensor"
	"github.com/strata-llm/strata/runtime/load"
)

const tinyGo = "../../models/tiny-go"

// openModel loads an HF directory as strata perplexity does: every
// position's logits, a context of ctx (windows of at most ctx rows; the
// artifact's prefill shape may be shorter).
func openModel(t *testing.T, dir string, ctx int) *load.Loaded {
	t.Helper()
	l, err := load.HF(dir, load.Options{PrefillRows: ctx, AllLogits: true, Context: ctx, History: "-"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// reference is tiny-go's HF reference (float64): its 256 tokens, their mean
// NLL over the 255 predictions, and the MTP head's top-1 over the 254
// positions with a token after next.
func reference(t *testing.T) (tokens []int, meanNLL, mtpTop1 float64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tinyGo, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		MeanNLL float64 `json:"tokens_mean_nll"`
		MTPTop1 float64 `json:"mtp_argmax_matches_next_next_token"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	return reftensor.Open(t, filepath.Join(tinyGo, "reference.safetensors")).Ints("tokens"), ref.MeanNLL, ref.MTPTop1
}

// TestPerplexityReference: one window of tiny-go's 256 reference tokens,
// scored from position 0, gives HF's mean NLL (2.9374) and MTP top-1
// (34.65%), fed in the prefill windows and a token at a time alike.
func TestPerplexityReference(t *testing.T) {
	tokens, want, wantMTP := reference(t)
	l := openModel(t, tinyGo, len(tokens))
	for _, rows := range []int{l.PrefillRows, 1} {
		windows := 0
		sc, mtp, err := Perplexity(l.Model, tokens, []int{0}, Options{Ctx: len(tokens), First: 0, Rows: rows, MTP: true,
			Window: func(n int, _ *Scores) { windows = n }})
		if err != nil {
			t.Fatal(err)
		}
		if windows != 1 || sc.N() != 255 || mtp.N() != 254 {
			t.Fatalf("rows %d: %d windows, %d scored, %d MTP; want 1, 255, 254", rows, windows, sc.N(), mtp.N())
		}
		if got := sc.MeanNLL(); math.Abs(got-want) > 1e-4 {
			t.Errorf("rows %d: mean NLL %.5f, reference %.4f", rows, got, want)
		}
		if got := mtp.Top1(); math.Abs(got-wantMTP) > 1e-4 {
			t.Errorf("rows %d: MTP top-1 %.5f, reference %.4f", rows, got, wantMTP)
		}
	}
}

// Scoring from --first on: the positions before it are not scored, and
// windows are fed from a fresh state (two identical windows score alike).
func TestPerplexityWindows(t *testing.T) {
	tokens, _, _ := reference(t)
	l := openModel(t, tinyGo, 64)
	text := append(append([]int(nil), tokens[:64]...), tokens[:64]...)
	var per []float64
	sc, _, err := Perplexity(l.Model, text, []int{0, 64}, Options{Ctx: 64, First: 32, Rows: 64,
		Window: func(n int, sc *Scores) { per = append(per, sc.MeanNLL()) }})
	if err != nil {
		t.Fatal(err)
	}
	if sc.N() != 2*31 || len(per) != 2 || math.Abs(per[0]-per[1]) > 1e-6 {
		t.Fatalf("%d scored; running mean NLL %v: want 62 and the same twice", sc.N(), per)
	}
}

func TestPerplexityRefuses(t *testing.T) {
	tokens, _, _ := reference(t)
	l := openModel(t, tinyGo, 32)
	for _, c := range []struct {
		starts []int
		opt    Options
		want   string
	}{
		{[]int{250}, Options{Ctx: 32, First: 0, Rows: 32}, "window 1 starts at token 250"},
		{[]int{0}, Options{Ctx: 32, First: 31, Rows: 32}, "want 0 ≤ first < 31"},
		{[]int{0}, Options{Ctx: 1, Rows: 1}, "need at least 2"},
	} {
		if _, _, err := Perplexity(l.Model, tokens, c.starts, c.opt); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v; want an error naming %q", c.opt, err, c.want)
		}
	}
}

// TestMTPLogits: the MTP head's teacher-forced rows are tiny-go's HF
// reference rows (float32 rounding of float64, |logit| up to ~20).
func TestMTPLogits(t *testing.T) {
	tokens, _, _ := reference(t)
	const fed = 41
	l := openModel(t, tinyGo, 64)
	mt, err := MTPLogits(l.Model, tokens[:fed], 16)
	if err != nil {
		t.Fatal(err)
	}
	vocab := l.Config.Architecture.VocabSize
	if mt.Name != "mtp_logits" || mt.DType != "F32" || len(mt.Shape) != 2 || mt.Shape[0] != fed-1 || mt.Shape[1] != vocab {
		t.Fatalf("tensor %s %s %v, want mtp_logits F32 [%d %d]", mt.Name, mt.DType, mt.Shape, fed-1, vocab)
	}
	got, err := mt.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	ref := reftensor.Open(t, filepath.Join(tinyGo, "reference.safetensors"))
	want, at := ref.Rows("mtp_logits"), ref.Ints("mtp_positions")
	checked := 0
	for i, p := range at {
		if p >= fed-1 {
			continue
		}
		checked++
		for j, w := range want[i] {
			if d := math.Abs(float64(got[p*vocab+j]) - float64(w)); d > 5e-4 {
				t.Fatalf("row %d, token %d: %g, reference %g", p, j, got[p*vocab+j], w)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d reference rows fall in the %d computed", checked, fed-1)
	}
	if _, err := MTPLogits(l.Model, tokens[:1], 16); err == nil || !strings.Contains(err.Error(), "needs at least 2") {
		t.Errorf("one fed token: %v", err)
	}
}
