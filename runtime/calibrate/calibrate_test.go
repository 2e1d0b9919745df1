package calibrate

import (
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/reftensor"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/load"
)

const tinyGo = "../../models/tiny-go"

// TestImatrix: two windows of 64 of tiny-go's reference tokens count 128
// rows into every plain weight and top_k (4) × 128 over a layer's experts,
// under the GGUF's names, with finite, non-negative sums; the text's files
// are recorded by base name, and the cpu observer is put back.
func TestImatrix(t *testing.T) {
	l, err := load.HF(tinyGo, load.Options{PrefillRows: 64, AllLogits: true, Context: 64, History: "-", Backend: load.BackendCPU})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tokens := reftensor.Open(t, filepath.Join(tinyGo, "reference.safetensors")).Ints("tokens")
	var seen []int
	m, _, err := Imatrix(l.Model, tokens, []int{0, 64}, Options{Ctx: 64, Rows: l.PrefillRows, Files: []string{"/a/b/calib.go", "x.go"},
		Window: func(n, windows int) { seen = append(seen, n, windows) }})
	if err != nil {
		t.Fatal(err)
	}
	if prev := cpu.SetObserver(nil); prev != nil {
		t.Error("the collector is still the cpu kernels' observer")
	}
	if !slices.Equal(seen, []int{1, 2, 2, 2}) || m.ChunkCount != 2 || m.ChunkSize != 64 || !slices.Equal(m.Datasets, []string{"calib.go", "x.go"}) {
		t.Fatalf("windows reported %v; chunks %d × %d; datasets %v", seen, m.ChunkCount, m.ChunkSize, m.Datasets)
	}
	if e := m.Entries["blk.0.attn_qkv.weight"]; e == nil || e.Cols != 256 || !slices.Equal(e.Counts, []float32{128}) {
		t.Errorf("blk.0.attn_qkv.weight: %+v, want 256 columns and 128 rows", e)
	}
	exps := m.Entries["blk.2.ffn_down_exps.weight"]
	if exps == nil || exps.NMat() != 32 || exps.Cols != 16 {
		t.Fatalf("blk.2.ffn_down_exps.weight: %+v, want 32 experts of 16 columns", exps)
	}
	var routed float32
	for _, c := range exps.Counts {
		routed += c
	}
	if routed != 128*4 {
		t.Errorf("rows routed to layer 2's experts: %v, want 128 tokens × top_k 4", routed)
	}
	for name, e := range m.Entries {
		for _, s := range e.Sums {
			if s < 0 || math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
				t.Fatalf("%s: a sum of squares %v", name, s)
			}
		}
	}

	_, _, err = Imatrix(l.Model, tokens, []int{0, 250}, Options{Ctx: 64, Rows: l.PrefillRows})
	if err == nil || !strings.Contains(err.Error(), "window 2 starts at token 250") {
		t.Errorf("a window past the text: %v", err)
	}
	if prev := cpu.SetObserver(nil); prev != nil {
		t.Error("a failed collection left its observer")
	}
}
