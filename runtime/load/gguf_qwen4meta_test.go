package load_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

// withoutConfig copies the GGUF at src to dst less its strata.config key,
// as llama.cpp's converter writes qwen4exp files.
func withoutConfig(t *testing.T, src, dst string) { withoutKeys(t, src, dst, gguf.KeyConfig) }

// withoutKeys copies the GGUF at src to dst less the named keys.
func withoutKeys(t *testing.T, src, dst string, keys ...string) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var kv []gguf.KV
	for _, p := range f.KV {
		if !slices.Contains(keys, p.Key) {
			kv = append(kv, p)
		}
	}
	var ts []gguf.Tensor
	for _, ti := range f.Tensors {
		tn, _ := f.Tensor(ti.Name)
		ts = append(ts, gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: ti.Name, Dims: ti.Dims, Type: ti.Type}, Data: tn.Data})
	}
	if err := gguf.WriteFile(dst, kv, ts); err != nil {
		t.Fatal(err)
	}
}

// A qwen4exp file without strata.config runs from its qwen4exp keys: the
// derived architecture is the original's (the n-gram store's base, divisor
// and seed recovered from the stored hash constants) but for split_parts,
// which no key holds and nothing in a GGUF reads, and its logits equal the
// original file's bit for bit. tiny-go (the trained checkpoint, MTP and PLE
// included) and q4-a (Flash-Next's structure, random weights, q8_0 trunk).
func TestGGUFQwen4ExpWithoutConfig(t *testing.T) {
	dir := t.TempDir()
	tinyGo := filepath.Join(dir, "tiny-go.gguf")
	{
		data, err := os.ReadFile("../../models/tiny-go/config.json")
		if err != nil {
			t.Fatal(err)
		}
		c, err := arch.ImportHF(data, models.ImportOptions{Name: "tiny-go"})
		if err != nil {
			t.Fatal(err)
		}
		ck, err := safetensors.OpenDir("../../models/tiny-go")
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		if _, err := convert.Write(tinyGo, c, weights.NewHF(ck, c), convert.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	q4a := filepath.Join(dir, "q4-a.gguf")
	{
		c, err := models.Embedded("q4-a")
		if err != nil {
			t.Fatal(err)
		}
		if c.Quant, err = convert.ParsePlan(c.Quant, "trunk=q8_0,router=f16"); err != nil {
			t.Fatal(err)
		}
		if _, err := convert.Write(q4a, c, weights.NewRandom(7), convert.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, path := range []string{tinyGo, q4a} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			bare := path + ".bare.gguf"
			withoutConfig(t, path, bare)
			f, err := gguf.Open(bare)
			if err != nil {
				t.Fatal(err)
			}
			got, err := weights.ConfigFromMetadata(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			orig := e2e.GGUF(t, path, load.GGUFOptions{Options: load.Options{AllLogits: true, PrefillRows: 8}})
			ga, wa := got.Architecture, orig.Config.Architecture
			if ga.PLE.SplitParts == 0 && wa.PLE.SplitParts != 0 || wa.PLE.SplitParts == 0 && ga.PLE.SplitParts != 0 {
				t.Errorf("split_parts %d, original %d", ga.PLE.SplitParts, wa.PLE.SplitParts)
			}
			ga.PLE.SplitParts = wa.PLE.SplitParts
			if !reflect.DeepEqual(ga, wa) {
				t.Errorf("derived architecture\n%+v\nwant\n%+v", ga, wa)
			}
			l := e2e.GGUF(t, bare, load.GGUFOptions{Options: load.Options{AllLogits: true, PrefillRows: 8}})
			tokens := []int{1, 5, 17, 300, 2, 99, 411, 64}
			want := e2e.RunLogits(t, orig, tokens, len(tokens))
			for i, row := range e2e.RunLogits(t, l, tokens, len(tokens)) {
				if d := e2e.MaxAbs(row, want[i]); d != 0 {
					t.Errorf("position %d: logits differ from the original file's by %.3g", i, d)
				}
			}
		})
	}
}

// A qwen4exp file without strata.config that lacks a key the config needs is
// refused naming the key.
func TestGGUFQwen4ExpMissingKey(t *testing.T) {
	dir := t.TempDir()
	c, err := models.Embedded("q4-a")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "q4-a.gguf")
	if _, err := convert.Write(path, c, weights.NewRandom(7), convert.Options{}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"qwen4exp.hyper_connection.low_rank", "qwen4exp.attention.compress_ratios", "qwen4exp.ple.layer_multipliers"} {
		bare := filepath.Join(dir, key+".gguf")
		withoutKeys(t, path, bare, gguf.KeyConfig, key)
		f, err := gguf.Open(bare)
		if err != nil {
			t.Fatal(err)
		}
		_, err = weights.ConfigFromMetadata(f)
		f.Close()
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("without %s: %v; want an error naming it", key, err)
		}
	}

	// Multipliers no seed makes: the seed, which no key holds, is named.
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var kv []gguf.KV
	var ts []gguf.Tensor
	for _, p := range f.KV {
		if p.Key == gguf.KeyConfig {
			continue
		}
		if p.Key == "qwen4exp.ple.layer_multipliers" {
			m := slices.Clone(p.Value.(gguf.Array).Values.([]uint64))
			m[0] += 2
			p.Value = gguf.Array{Elem: gguf.TypeUint64, Values: m}
		}
		kv = append(kv, p)
	}
	for _, ti := range f.Tensors {
		tn, _ := f.Tensor(ti.Name)
		ts = append(ts, gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: ti.Name, Dims: ti.Dims, Type: ti.Type}, Data: tn.Data})
	}
	odd := filepath.Join(dir, "odd.gguf")
	err = gguf.WriteFile(odd, kv, ts)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if f, err = gguf.Open(odd); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := weights.ConfigFromMetadata(f); err == nil || !strings.Contains(err.Error(), "seed") {
		t.Errorf("multipliers of no seed: %v; want an error naming the seed", err)
	}
}
