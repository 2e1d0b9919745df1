package e2e

import (
	"encoding/binary"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/weights"
)

// LoadEdited loads an oracle on the cpu backend with its config's window
// shapes plus one of extraRows rows, every graph edited by edit before it
// is bound.
func LoadEdited(t testing.TB, name string, extraRows int, edit func(*graph.Graph)) *engine.Model {
	t.Helper()
	c, err := models.Load(Path("models", name, "model.toml"))
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(OracleDir(name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	graphs, err := gen.Windows(c, true, extraRows)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range graphs {
		edit(g)
	}
	m, err := engine.LoadWith(c, graphs, weights.NewHF(ck, c), cpu.Backend)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// WithMTP writes a copy of q4-a with an MTP head: its decoder layer copies
// layer 3 (QSA), its mixer the trunk's, its projections are deterministic
// pseudo-random. There is no reference for MTP, so the tests using it check
// what must hold whatever the weights: the head leaves the trunk alone, and
// its caches make any split into windows agree.
func WithMTP(t testing.TB) string {
	t.Helper()
	src, err := safetensors.OpenDir(OracleDir("q4-a"))
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
	cfg, _ := os.ReadFile(filepath.Join(OracleDir("q4-a"), "config.json"))
	cfg = []byte(strings.Replace(string(cfg), `"model_type": "qwen4_exp_text",`, `"model_type": "qwen4_exp_text", "mtp_num_hidden_layers": 1,`, 1))
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TinyA is the tiny-a oracle's config, graphs (every row's logits), kernel
// artifact, weights and reference, for suites that bind graphs to a
// backend themselves (skipping without clang: they run the emulator).
func TinyA(t testing.TB) (*models.Config, []*graph.Graph, *artifact.Artifact, engine.WeightSource, Reference) {
	t.Helper()
	RequireEmulator(t)
	c, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	graphs, err := gen.Windows(c, true)
	if err != nil {
		t.Fatal(err)
	}
	am, err := gen.Kernels(c, graphs)
	if err != nil {
		t.Fatal(err)
	}
	dir := OracleDir("tiny-a")
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return c, graphs, am, weights.NewHF(ck, c), LoadReference(t, dir)
}

// Prefill16 runs the first 16 reference tokens in one window on backend b
// and returns every row's logits.
func Prefill16(c *models.Config, graphs []*graph.Graph, src engine.WeightSource, b backend.Backend, ref Reference) ([][]float32, error) {
	return PrefillIn(c, graphs, src, b, ref, 16)
}

// PrefillIn runs the first 16 reference tokens in windows of rows rows (a
// shape graphs hold) and returns their logits.
func PrefillIn(c *models.Config, graphs []*graph.Graph, src engine.WeightSource, b backend.Backend, ref Reference, rows int) ([][]float32, error) {
	m, err := engine.LoadWith(c, graphs, src, b)
	if err != nil {
		return nil, err
	}
	var got [][]float32
	_, err = m.NewSession().Generate(ref.Tokens[:16], 0, engine.GenerateOptions{PrefillRows: rows, OnLogits: func(r []float32) error {
		got = append(got, r)
		return nil
	}})
	return got, err
}
