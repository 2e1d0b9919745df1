package strata

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/safetensors"
)

// reference is an oracle's reference.safetensors.
type reference struct {
	tokens, greedy             []int
	logits, greedyLogits       [][]float32
}

func loadReference(t *testing.T, dir string) reference {
	t.Helper()
	f, err := safetensors.Open(filepath.Join(dir, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ints := func(name string) []int {
		tt, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("%s: no tensor %s", dir, name)
		}
		v, err := tt.Int32s()
		if err != nil {
			t.Fatal(err)
		}
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = int(x)
		}
		return out
	}
	rows := func(name string) [][]float32 {
		tt, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("%s: no tensor %s", dir, name)
		}
		v, err := tt.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		n := tt.Shape[1]
		var out [][]float32
		for i := 0; i < tt.Shape[0]; i++ {
			out = append(out, v[i*n:(i+1)*n])
		}
		return out
	}
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

func TestScratchOracle(t *testing.T) {
	for _, name := range []string{"tiny-a", "tiny-k512"} {
		dir := filepath.Join("testdata/oracles", name)
		ref := loadReference(t, dir)
		l, err := OpenHF(dir, HFOptions{AllLogits: true, PrefillRows: 64})
		if err != nil {
			t.Fatal(err)
		}
		got := runLogits(t, l, ref.tokens, 64)
		worst := 0.0
		for i := range got {
			worst = math.Max(worst, relL2(got[i], ref.logits[i]))
		}
		fmt.Println(name, "worst rel L2", worst)
	}
}
