package load

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/weights"

	"github.com/strata-llm/strata/internal/reftensor"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// reference is an oracle's reference.safetensors.
type reference struct {
	tokens, greedy       []int
	logits, greedyLogits [][]float32
}

func loadReference(t *testing.T, dir string) reference {
	t.Helper()
	f := reftensor.Open(t, filepath.Join(dir, "reference.safetensors"))
	ints, rows := f.Ints, f.Rows
	return reference{tokens: ints("tokens"), greedy: ints("greedy_tokens"), logits: rows("logits"), greedyLogits: rows("greedy_logits")}
}

// relL2 is ‖a−b‖/‖b‖.
func relL2(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		e := float64(a[i]) - float64(b[i])
		d += e * e
		n += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(d / n)
}

func runLogits(t *testing.T, l *Loaded, tokens []int, rows int) [][]float32 {
	t.Helper()
	s := l.Model.NewSession()
	var got [][]float32
	_, err := s.Generate(tokens, 0, engine.GenerateOptions{PrefillRows: rows, OnLogits: func(r []float32) error {
		got = append(got, r)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// oracle is one vendored HF reference with its tolerance (per-position
// relative L2 of the logits).
type oracle struct {
	name string
	tol  float64
}

var oracles = []oracle{{"tiny-a", 1e-4}, {"tiny-k512", 1e-3}, {"q4-a", 1e-4}}

func openOracle(t *testing.T, name string, opt Options) (*Loaded, reference) {
	t.Helper()
	dir := filepath.Join("../../testdata/oracles", name)
	l, err := HF(dir, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, loadReference(t, dir)
}

func checkLogits(t *testing.T, what string, got, want [][]float32, tol float64) float64 {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d logit rows, want %d", what, len(got), len(want))
	}
	worst := 0.0
	for i := range want {
		e := relL2(got[i], want[i])
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

// TestOracleLogits: a full prefill of the reference tokens (one window) and of
// the greedy path reproduces the float64 HF logits.
func TestOracleLogits(t *testing.T) {
	for _, o := range oracles {
		t.Run(o.name, func(t *testing.T) {
			ref := ref0(t, o.name)
			l, _ := openOracle(t, o.name, Options{AllLogits: true, PrefillRows: len(ref.tokens)})
			w1 := checkLogits(t, "tokens", runLogits(t, l, ref.tokens, len(ref.tokens)), ref.logits, o.tol)
			w2 := checkLogits(t, "greedy_tokens", runLogits(t, l, ref.greedy, len(ref.greedy)), ref.greedyLogits, o.tol)
			t.Logf("worst per-position relative L2: tokens %.3g, greedy %.3g", w1, w2)
		})
	}
}

func ref0(t *testing.T, name string) reference {
	return loadReference(t, filepath.Join("../../testdata/oracles", name))
}

// TestOracleGreedy: prefill the 16-token prompt, then decode one row at a
// time; the tokens equal HF's cached greedy decode exactly and every fed
// token's logits match the full-forward reference.
func TestOracleGreedy(t *testing.T) {
	const prompt = 16
	for _, o := range oracles {
		t.Run(o.name, func(t *testing.T) {
			l, ref := openOracle(t, o.name, Options{AllLogits: true})
			s := l.Model.NewSession()
			var logits [][]float32
			n := len(ref.greedy) - prompt
			got, err := s.Generate(ref.greedy[:prompt], n, engine.GenerateOptions{PrefillRows: l.PrefillRows, OnLogits: func(r []float32) error {
				logits = append(logits, r)
				return nil
			}})
			if err != nil {
				t.Fatal(err)
			}
			want := ref.greedy[prompt:]
			for i := range want {
				if i >= len(got) || got[i] != want[i] {
					t.Fatalf("greedy token %d: got %v, want %v", i, got, want)
				}
			}
			// P + N − 1 rows were fed: the reference's first P + N − 1 rows.
			checkLogits(t, "decode path", logits, ref.greedyLogits[:prompt+n-1], o.tol)
		})
	}
}

// TestPrefillWindowsAgree: the same tokens in one window, in windows of 5 rows
// and one row at a time give the same logits.
func TestPrefillWindowsAgree(t *testing.T) {
	for _, o := range oracles {
		t.Run(o.name, func(t *testing.T) {
			ref := ref0(t, o.name)
			var base [][]float32
			for _, rows := range []int{len(ref.tokens), 5, 1} {
				l, _ := openOracle(t, o.name, Options{AllLogits: true, PrefillRows: rows})
				got := runLogits(t, l, ref.tokens, rows)
				if base == nil {
					base = got
					continue
				}
				for i := range base {
					if e := relL2(got[i], base[i]); e > 1e-5 {
						t.Errorf("windows of %d rows, position %d: %.3g from the one-window logits", rows, i, e)
					}
				}
			}
		})
	}
}

// TestGeneratedGraphsRun: the checked-in artifact of tiny-a, loaded from
// its folder as the runtime loads one, decodes the reference greedy path
// (prefill in the 16-row last-row-logits shape, then 1-row windows).
func TestGeneratedGraphsRun(t *testing.T) {
	c, err := models.Load("../../models/tiny-a/model.toml")
	if err != nil {
		t.Fatal(err)
	}
	a, err := artifact.Load(os.DirFS("../../generated/tiny-a/artifact"))
	if err != nil {
		t.Fatal(err)
	}
	graphs, err := graphsOf(a, c, false)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir("../../testdata/oracles/tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := engine.LoadWith(c, graphs, weights.NewHF(ck, c), cpu.Backend)
	if err != nil {
		t.Fatal(err)
	}
	ref := ref0(t, "tiny-a")
	got, err := m.NewSession().Generate(ref.greedy[:16], 48, engine.GenerateOptions{PrefillRows: c.Windows.PrefillRows})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ref.greedy[16:]) {
		t.Fatalf("greedy tokens %v, want %v", got, ref.greedy[16:])
	}
}
