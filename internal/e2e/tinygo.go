package e2e

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-llm/strata/internal/reftensor"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// TinyGoDir is the vendored trained model (models/tiny-go/README.md).
func TinyGoDir() string { return Path("models", "tiny-go") }

// TinyGoRef is tiny-go's reference.safetensors: float64 HF logits stored as
// float32, at the rows listed in the *_positions tensors.
type TinyGoRef struct {
	Tokens, Greedy         []int
	Positions, MTPPosition []int
	Logits, GreedyLogits   [][]float32
	MTPLogits              [][]float32 // row i: MTP logits for Tokens[MTPPosition[i]+2]
}

// LoadTinyGoRef reads tiny-go's reference.
func LoadTinyGoRef(t testing.TB) TinyGoRef {
	t.Helper()
	f := reftensor.Open(t, filepath.Join(TinyGoDir(), "reference.safetensors"))
	ints, rows := f.Ints, f.Rows
	return TinyGoRef{
		Tokens: ints("tokens"), Greedy: ints("greedy_tokens"),
		Positions: ints("logits_positions"), MTPPosition: ints("mtp_positions"),
		Logits: rows("logits"), GreedyLogits: rows("greedy_logits"), MTPLogits: rows("mtp_logits"),
	}
}

// TinyGoAbsTol bounds |ours − reference| per logit. The reference is a
// float64 forward of the bf16 weights; ours runs in float32. q4-a (|logit| ≲ 1)
// stays within 2.3e-5 absolute of its reference; tiny-go's logits reach ~20,
// so its float32 rounding may be up to ~20× larger: 4.6e-4 (measured: ≤ 2.2e-5).
const TinyGoAbsTol = 5e-4

// CheckAbs compares logit rows element by element and by argmax; it returns
// the worst absolute difference.
func CheckAbs(t testing.TB, what string, got, want [][]float32, at []int, tol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		d := 0.0
		for j := range want[i] {
			d = math.Max(d, math.Abs(float64(got[i][j])-float64(want[i][j])))
		}
		worst = math.Max(worst, d)
		if d > tol {
			t.Errorf("%s: position %d: max |logit − reference| %.3g > %.0e", what, at[i], d, tol)
		}
		if a, b := engine.Argmax(got[i]), engine.Argmax(want[i]); a != b {
			t.Errorf("%s: position %d: argmax %d, reference %d", what, at[i], a, b)
		}
	}
	return worst
}

// Pick returns rows[at[i]] for each i.
func Pick(rows [][]float32, at []int) [][]float32 {
	out := make([][]float32, len(at))
	for i, p := range at {
		out[i] = rows[p]
	}
	return out
}

// Iota is 0, 1, …, n−1.
func Iota(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// CheckTinyGo runs the reference checks of tiny-go on one backend: the
// stored trunk rows of a full forward of the reference tokens, the MTP
// head's teacher-forced rows, the full forward of the greedy path, and the
// greedy decode token for token.
func CheckTinyGo(t *testing.T, opt load.Options, window int) {
	ref := LoadTinyGoRef(t)
	opt.AllLogits, opt.PrefillRows = true, window
	l, err := load.HF(TinyGoDir(), WithGenerator(opt))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	start := time.Now()
	trunk, mtp, err := l.Model.TeacherForced(ref.Tokens, window)
	if err != nil {
		t.Fatal(err)
	}
	w1 := CheckAbs(t, "tokens", Pick(trunk, ref.Positions), ref.Logits, ref.Positions, TinyGoAbsTol)
	w2 := CheckAbs(t, "mtp", Pick(mtp, ref.MTPPosition), ref.MTPLogits, ref.MTPPosition, TinyGoAbsTol)

	forward := time.Since(start)
	start = time.Now()
	gl, _, err := l.Model.TeacherForced(ref.Greedy, window)
	if err != nil {
		t.Fatal(err)
	}
	w3 := CheckAbs(t, "greedy_tokens", gl, ref.GreedyLogits, Iota(len(ref.Greedy)), TinyGoAbsTol)

	greedy := time.Since(start)
	start = time.Now()
	const prompt = 16
	want := ref.Greedy[prompt:]
	if Race && len(want) > 16 {
		want = want[:16]
	}
	got, err := l.Model.NewSession().Generate(ref.Greedy[:prompt], len(want), engine.GenerateOptions{PrefillRows: prompt})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range want {
		if i >= len(got) || got[i] != want {
			t.Fatalf("greedy token %d: got %v, want %v", i, got, ref.Greedy[prompt:prompt+len(got)])
		}
	}
	t.Logf("worst |logit − reference|: tokens %.3g, mtp %.3g, greedy %.3g; greedy path equal (%d tokens); %d-token forward %v, greedy forward %v, decode %v",
		w1, w2, w3, len(got), len(ref.Tokens), forward.Round(time.Millisecond), greedy.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}
