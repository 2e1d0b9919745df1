package e2e

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-llm/strata/internal/reftensor"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// Reference is an oracle's reference.safetensors.
type Reference struct {
	Tokens, Greedy       []int
	Logits, GreedyLogits [][]float32
}

// LoadReference reads dir/reference.safetensors.
func LoadReference(t testing.TB, dir string) Reference {
	t.Helper()
	f := reftensor.Open(t, filepath.Join(dir, "reference.safetensors"))
	ints, rows := f.Ints, f.Rows
	return Reference{Tokens: ints("tokens"), Greedy: ints("greedy_tokens"), Logits: rows("logits"), GreedyLogits: rows("greedy_logits")}
}

// Ref is the reference of the oracle name.
func Ref(t testing.TB, name string) Reference { return LoadReference(t, OracleDir(name)) }

// Oracle is one vendored HF reference with its tolerance (per-position
// relative L2 of the logits).
type Oracle struct {
	Name string
	Tol  float64
}

// Oracles are the vendored references every backend is held to.
var Oracles = []Oracle{{"tiny-a", 1e-4}, {"tiny-k512", 1e-3}, {"q4-a", 1e-4}}

// OpenOracle opens the oracle name with opt (and the generator) and reads
// its reference.
func OpenOracle(t testing.TB, name string, opt load.Options) (*load.Loaded, Reference) {
	t.Helper()
	return HF(t, OracleDir(name), opt), Ref(t, name)
}

// RelL2 is ‖a−b‖/‖b‖.
func RelL2(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		e := float64(a[i]) - float64(b[i])
		d += e * e
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}

// MaxAbs is max |a−b|.
func MaxAbs(a, b []float32) float64 {
	m := 0.0
	for i := range b {
		m = math.Max(m, math.Abs(float64(a[i])-float64(b[i])))
	}
	return m
}

// RunLogits prefills tokens in windows of rows in a fresh session and
// returns every row's logits (the model must compute all of them).
func RunLogits(t testing.TB, l *load.Loaded, tokens []int, rows int) [][]float32 {
	t.Helper()
	got, err := TryLogits(l, tokens, rows)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TryLogits is RunLogits returning the run's error: a barrier test whose
// deleted barrier leaves poisoned scratch in the logits gets the engine's
// engine.ErrNonFinite refusal, which means the output changed.
func TryLogits(l *load.Loaded, tokens []int, rows int) ([][]float32, error) {
	s := l.Model.NewSession()
	var got [][]float32
	_, err := s.Generate(tokens, 0, engine.GenerateOptions{PrefillRows: rows, OnLogits: func(r []float32) error {
		got = append(got, r)
		return nil
	}})
	return got, err
}

// CheckGreedyDecode prefills the first prompt tokens of ref's greedy path
// in windows of rows, then decodes one row at a time: the tokens must equal
// HF's greedy decode exactly and every fed token's logits (P + N − 1 rows)
// the full-forward reference within tol. It returns the worst error and
// how many tokens were decoded.
func CheckGreedyDecode(t testing.TB, l *load.Loaded, ref Reference, prompt, rows int, tol float64) (worst float64, n int) {
	t.Helper()
	var logits [][]float32
	n = len(ref.Greedy) - prompt
	got, err := l.Model.NewSession().Generate(ref.Greedy[:prompt], n, engine.GenerateOptions{PrefillRows: rows,
		OnLogits: func(r []float32) error { logits = append(logits, r); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range ref.Greedy[prompt:] {
		if i >= len(got) || got[i] != want {
			t.Fatalf("greedy token %d: got %v, want %v", i, got, ref.Greedy[prompt:])
		}
	}
	return CheckLogits(t, "decode path", logits, ref.GreedyLogits[:prompt+n-1], tol), n
}

// CheckLogits holds every row of got within relative L2 tol of want, with
// the same argmax, and returns the worst error.
func CheckLogits(t testing.TB, what string, got, want [][]float32, tol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logit rows, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		e := RelL2(got[i], want[i])
		worst = math.Max(worst, e)
		if e > tol {
			t.Errorf("%s: position %d: relative L2 error %.3g > %.0e", what, i, e, tol)
		}
		if engine.Argmax(got[i]) != engine.Argmax(want[i]) {
			t.Errorf("%s: position %d: argmax %d, reference %d", what, i, engine.Argmax(got[i]), engine.Argmax(want[i]))
		}
	}
	return worst
}

// DecodeAll runs prompt and n generated tokens through a fresh session in
// the model's prefill windows and returns the tokens and every fed row's
// logits.
func DecodeAll(t testing.TB, l *load.Loaded, prompt []int, n int) ([]int, [][]float32) {
	t.Helper()
	var logits [][]float32
	out, err := l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: l.PrefillRows,
		OnLogits: func(r []float32) error { logits = append(logits, r); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return out, logits
}

// SameRun asserts two runs gave identical tokens and logits, bit for bit.
func SameRun(t testing.TB, what string, gotT, wantT []int, gotL, wantL [][]float32) {
	t.Helper()
	if !slices.Equal(gotT, wantT) {
		t.Fatalf("%s: tokens %v, want %v", what, gotT, wantT)
	}
	for i := range wantL {
		if !slices.Equal(gotL[i], wantL[i]) {
			t.Fatalf("%s: row %d logits differ", what, i)
		}
	}
}
