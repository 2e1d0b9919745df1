package load

import (
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// loadQ4 loads the q4-a oracle over graphs edited by edit, prefill in
// windows of up to 80 rows.
func loadQ4(t *testing.T, edit func(*graph.Graph)) *engine.Model {
	return loadEdited(t, "q4-a", 80, edit)
}

func feed(t *testing.T, m *engine.Model, tokens []int, rows int) [][]float32 {
	t.Helper()
	var got [][]float32
	_, err := m.NewSession().Generate(tokens, 0, engine.GenerateOptions{PrefillRows: rows, OnLogits: func(r []float32) error {
		got = append(got, r)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// TestQSASelectionDropsBlocks: q4-a's budget is 4 blocks of 4 tokens, so from
// position 19 on the indexer must drop blocks. Attending densely instead must
// leave the early positions unchanged and move later ones off the reference
// (so the sparse path that matches the reference really selects).
func TestQSASelectionDropsBlocks(t *testing.T) {
	ref := ref0(t, "q4-a")
	sparse := feed(t, loadQ4(t, func(*graph.Graph) {}), ref.tokens, 80)
	dense := feed(t, loadQ4(t, func(g *graph.Graph) {
		for i := range g.Dispatches {
			for j, c := range g.Dispatches[i].Consts {
				if g.Dispatches[i].Family == "attention" && c.Name == "sparse" {
					g.Dispatches[i].Consts[j].Value = 0
				}
			}
		}
	}), ref.tokens, 80)
	const firstSparse = 19 // 20 visible tokens = 5 complete blocks > 4
	worst := 0.0
	for i := range ref.tokens {
		if e := relL2(sparse[i], ref.logits[i]); e > 1e-4 {
			t.Errorf("position %d: sparse attention is %.3g from the reference", i, e)
		}
		d := relL2(dense[i], ref.logits[i])
		if i < firstSparse && d > 1e-6+relL2(sparse[i], ref.logits[i]) {
			t.Errorf("position %d: dense and sparse differ below the budget (%.3g)", i, d)
		}
		if i >= firstSparse {
			worst = max(worst, d)
		}
	}
	if worst < 1e-2 {
		t.Errorf("dense attention stays within %.3g of the reference past the budget: block selection is not exercised", worst)
	}
	t.Logf("dense attention past the budget: worst relative L2 %.3g from the reference", worst)
}

// TestNgramAcrossEOS: the reference sequence has an EOS at index 37. Windows
// that end exactly at the EOS and right after it carry the n-gram context
// across window boundaries; every row still matches the reference.
func TestNgramAcrossEOS(t *testing.T) {
	ref := ref0(t, "q4-a")
	if ref.tokens[37] != 3 {
		t.Fatalf("reference token 37 is %d, want the EOS (3)", ref.tokens[37])
	}
	m := loadQ4(t, func(*graph.Graph) {})
	for _, split := range []int{37, 38, 39} {
		s := m.NewSession()
		var got [][]float32
		for _, part := range [][]int{ref.tokens[:split], ref.tokens[split:]} {
			rows, err := s.Window(part)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, rows...)
		}
		for i := 30; i < len(ref.tokens); i++ {
			if e := relL2(got[i], ref.logits[i]); e > 1e-4 {
				t.Errorf("windows split at %d: position %d is %.3g from the reference", split, i, e)
			}
		}
	}
}

// withMTP writes a copy of q4-a with an MTP head: its decoder layer copies
// layer 3 (QSA), its mixer the trunk's, its projections are deterministic
// pseudo-random. There is no reference for MTP, so the tests below check
// what must hold whatever the weights: the head leaves the trunk alone, and
// its caches make any split into windows agree.
func withMTP(t *testing.T) string {
	t.Helper()
	src, err := safetensors.OpenDir(filepath.Join("../../testdata/oracles", "q4-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ts []safetensors.Tensor
	for _, n := range src.Names() {
		tt, _ := src.Tensor(n)
		ts = append(ts, tt)
		if rest, ok := strings.CutPrefix(n, "model.layers.3."); ok {
			c := tt
			c.Name = "mtp.layers.0." + rest
			ts = append(ts, c)
		}
		if rest, ok := strings.CutPrefix(n, "model.hyper_connection_mixer."); ok {
			c := tt
			c.Name = "mtp.hyper_connection_mixer." + rest
			ts = append(ts, c)
		}
	}
	rng := rand.New(rand.NewSource(7))
	f32 := func(name string, scale float64, shape ...int) {
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]byte, 4*n)
		for i := 0; i < n; i++ {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(float32(rng.NormFloat64()*scale)))
		}
		ts = append(ts, safetensors.Tensor{Name: name, DType: "F32", Shape: shape, Data: data})
	}
	f32("mtp.fc_embedding.weight", 0.1, 64, 64)
	f32("mtp.fc_hidden.weight", 0.1, 64, 64)
	f32("mtp.pre_fc_norm_embedding.weight", 0.1, 64)
	f32("mtp.pre_fc_norm_hidden.weight", 0.1, 256)
	dir := filepath.Join(t.TempDir(), "q4-a-mtp")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(filepath.Join("../../testdata/oracles", "q4-a", "config.json"))
	cfg = []byte(strings.Replace(string(cfg), `"model_type": "qwen4_exp_text",`, `"model_type": "qwen4_exp_text", "mtp_num_hidden_layers": 1,`, 1))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestMTPHead(t *testing.T) {
	ref := ref0(t, "q4-a")
	l, err := HF(withMTP(t), Options{AllLogits: true, PrefillRows: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if !l.Model.HasMTP() {
		t.Fatal("the MTP head did not load")
	}
	toks := ref.tokens[:9]

	// The trunk is untouched by the head: its logits still match the reference.
	whole := l.Model.NewSession()
	trunk, err := whole.Window(toks[:8])
	if err != nil {
		t.Fatal(err)
	}
	for i := range trunk {
		if e := relL2(trunk[i], ref.logits[i]); e > 1e-4 {
			t.Fatalf("trunk position %d: %.3g from the reference with the MTP head loaded", i, e)
		}
	}
	// Head over the 8 rows at once: row i drafts the token after toks[i+1].
	drafts, err := whole.MTPWindow(toks[1:9], 0)
	if err != nil {
		t.Fatal(err)
	}
	// The same rows one window at a time: the head's caches carry the context.
	step := l.Model.NewSession()
	for i := 0; i < 8; i++ {
		if _, err := step.Window(toks[i : i+1]); err != nil {
			t.Fatal(err)
		}
		got, err := step.MTPWindow(toks[i+1:i+2], i)
		if err != nil {
			t.Fatal(err)
		}
		if e := relL2(got[0], drafts[i]); e > 1e-5 {
			t.Errorf("MTP row %d: one-row windows differ from one 8-row window by %.3g", i, e)
		}
		for _, v := range got[0] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("MTP row %d: non-finite logit", i)
			}
		}
	}
}
