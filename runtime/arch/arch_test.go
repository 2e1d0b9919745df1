package arch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// The embedded models of each architecture, real sizes and test ones.
var models3, models4 = []string{"qwen3-next-80b-a3b", "tiny-a"}, []string{"qwen38-flash-next", "q4-a", "tiny-go"}

func embedded(t *testing.T, name string) *models.Config {
	t.Helper()
	c, err := models.Embedded(name)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// metadataFile writes kv (no tensors) and opens it.
func metadataFile(t *testing.T, kv []gguf.KV) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := gguf.WriteFile(path, kv, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// The metadata a config writes checks back against it; a config that
// differs in a checked field is refused naming the key and both values; a
// file of the other architecture is refused.
func TestMetadataChecksBack(t *testing.T) {
	for _, name := range append(slices.Clone(models3), models4...) {
		c := embedded(t, name)
		ar, err := ByModelType(c.Architecture.ModelType)
		if err != nil {
			t.Fatal(err)
		}
		kv, err := ar.Metadata(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		f := metadataFile(t, kv)
		if err := ar.Check(f, c); err != nil {
			t.Errorf("%s: its own metadata: %v", name, err)
		}
		other := *c
		other.Architecture.MoE.NumExperts++
		other.Architecture.LinearAttention.ValueHeadDim *= 2
		err = ar.Check(f, &other)
		for _, want := range []string{
			ar.Key("expert_count") + " = " + itoa(c.Architecture.MoE.NumExperts) + ", but the model config says " + itoa(other.Architecture.MoE.NumExperts),
			ar.Key("ssm.inner_size") + " = " + itoa(c.Architecture.LinearAttention.ValueDim()),
		} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: other config: %v, want it to say %q", name, err, want)
			}
		}
		for _, o := range All {
			if o != ar {
				if err := o.Check(f, c); err == nil || !strings.Contains(err.Error(), "general.architecture is "+`"`+ar.GGUF+`"`) {
					t.Errorf("%s read as %s: %v", name, o.GGUF, err)
				}
			}
		}
	}
}

// A file without a key the table needs is refused naming the file and key.
func TestCheckMissingKey(t *testing.T) {
	c := embedded(t, "qwen3-next-80b-a3b")
	kv, err := QwenNext.Metadata(c)
	if err != nil {
		t.Fatal(err)
	}
	kv = slices.DeleteFunc(kv, func(p gguf.KV) bool { return p.Key == "qwen3next.full_attention_interval" })
	f := metadataFile(t, kv)
	if err := QwenNext.Check(f, c); err == nil || !strings.Contains(err.Error(), "qwen3next.full_attention_interval missing") || !strings.Contains(err.Error(), "m.gguf") {
		t.Errorf("missing key: %v", err)
	}
}

// A file of an architecture strata has no table for is refused naming it.
func TestConfigOfOtherArchitecture(t *testing.T) {
	f := metadataFile(t, []gguf.KV{{Key: "general.architecture", Value: "llama"}})
	if _, err := ConfigOf(f); err == nil || !strings.Contains(err.Error(), `general.architecture is "llama"`) || !strings.Contains(err.Error(), "pass its model config") {
		t.Errorf("llama file: %v", err)
	}
}

// The metadata of the 80B model are llama.cpp's (qwen3_next.md §8), in its
// converter's order and types.
func TestQwenNextMetadata(t *testing.T) {
	kv, err := QwenNext.Metadata(embedded(t, "qwen3-next-80b-a3b"))
	if err != nil {
		t.Fatal(err)
	}
	want := []gguf.KV{{Key: "general.architecture", Value: "qwen3next"}}
	for _, p := range []struct {
		key string
		v   any
	}{
		{"block_count", uint32(48)}, {"context_length", uint32(262144)}, {"embedding_length", uint32(2048)},
		{"feed_forward_length", uint32(5120)}, {"attention.head_count", uint32(16)}, {"attention.head_count_kv", uint32(2)},
		{"attention.key_length", uint32(256)}, {"attention.value_length", uint32(256)},
		{"attention.layer_norm_rms_epsilon", float32(1e-6)}, {"rope.freq_base", float32(1e7)}, {"rope.dimension_count", uint32(64)},
		{"expert_count", uint32(512)}, {"expert_used_count", uint32(10)}, {"expert_feed_forward_length", uint32(512)},
		{"expert_shared_feed_forward_length", uint32(512)}, {"ssm.conv_kernel", uint32(4)}, {"ssm.inner_size", uint32(4096)},
		{"ssm.state_size", uint32(128)}, {"ssm.time_step_rank", uint32(32)}, {"ssm.group_count", uint32(16)},
		{"full_attention_interval", uint32(4)}, {"nextn_predict_layers", uint32(1)},
	} {
		want = append(want, gguf.KV{Key: "qwen3next." + p.key, Value: p.v})
	}
	if !slices.Equal(kv, want) {
		t.Errorf("metadata\n %v\nwant\n %v", kv, want)
	}
}

// Every row of every table names its field, and a GGUF key with a getter
// or an HF key with an import (or both); GGUF keys are unique, and so are
// the HF keys rows import; the HF keys of the rows that take an HF value as
// it is name the config field the import fills from it (checked on the
// oracles' config.json files).
func TestTables(t *testing.T) {
	for _, ar := range All {
		seen, seenHF := map[string]bool{}, map[string]bool{}
		for _, p := range ar.Params {
			gguf, hf := p.Key != "" && p.Get != nil, p.HF != "" && p.FromHF != nil
			if p.Field == "" || !gguf && !hf || p.Key != "" && seen[p.Key] || hf && seenHF[p.HF] {
				t.Errorf("%s: row %+v: a field, and a GGUF key and getter or an HF key and import, once each", ar.GGUF, p)
			}
			if p.Key != "" {
				seen[p.Key] = true
			}
			if hf {
				seenHF[p.HF] = true
			}
		}
	}
	configs, err := filepath.Glob(filepath.Join("..", "..", "testdata", "oracles", "*", "config.json"))
	if err != nil || len(configs) < 3 {
		t.Fatalf("oracle configs %v (%v): want the three oracles' at least", configs, err)
	}
	for _, path := range configs {
		oracle := filepath.Base(filepath.Dir(path))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ImportHF(data, models.ImportOptions{Name: oracle})
		if err != nil {
			t.Fatal(err)
		}
		var hf map[string]any
		if err := json.Unmarshal(data, &hf); err != nil {
			t.Fatal(err)
		}
		ar, err := ByModelType(c.Architecture.ModelType)
		if err != nil {
			t.Fatal(err)
		}
		checked := 0
		for _, p := range ar.Params {
			v, ok := hf[p.HF]
			if rp, isMap := hf["rope_parameters"].(map[string]any); !ok && isMap {
				v, ok = rp[p.HF]
			}
			if !p.HFAsIs || !p.inGGUF() || !ok {
				continue
			}
			got, err := p.Get(&c.Architecture)
			if err != nil {
				t.Fatal(err)
			}
			if n, _ := v.(float64); float64(got.Int)+got.Float != n {
				t.Errorf("%s: %s: config.json %s = %v, but the imported config's %s is %s", oracle, ar.Key(p.Key), p.HF, v, p.Field, show(p.Type, got))
			}
			checked++
		}
		if checked < 15 {
			t.Errorf("%s: only %d rows checked against config.json", oracle, checked)
		}
	}
}

func itoa(n int) string { return strings.TrimSpace(show(Uint, Value{Int: n})) }
