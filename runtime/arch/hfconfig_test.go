package arch

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
)

func oracleConfig(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile("../../testdata/oracles/" + name + "/config.json")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// editJSON rewrites an HF config: set non-nil values, delete keys mapped to nil.
func editJSON(t *testing.T, data []byte, edits map[string]any) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	for k, v := range edits {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var tinyImportOptions = models.ImportOptions{ContextLength: 256, MaxDecodeRows: 4, PrefillRows: 16}

func TestImportHFMatchesCheckedInTinyModels(t *testing.T) {
	for _, name := range []string{"tiny-a", "tiny-k512"} {
		opts := tinyImportOptions
		opts.Name = name
		got, err := ImportHF(oracleConfig(t, name), opts)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want, err := models.Load("../../models/" + name + "/model.toml")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: import differs from the checked-in model.toml:\n got %+v\nwant %+v", name, got, want)
		}
	}
}

// The tiny-a values the spec derives (§1), checked independently of the
// checked-in file.
func TestImportHFTinyAValues(t *testing.T) {
	c, err := ImportHF(oracleConfig(t, "tiny-a"), models.ImportOptions{Name: "tiny-a"})
	if err != nil {
		t.Fatal(err)
	}
	a := c.Architecture
	if a.LinearAttention.ConvDim() != 128 || a.Attention.RotaryDim() != 8 || !a.Attention.OutputGate ||
		a.LayerTypes[3] != models.LayerFullAttention || a.LayerTypes[2] != models.LayerLinearAttention ||
		c.Quant != (models.QuantPlan{Trunk: "f32", Experts: "f32", Embeddings: "f32", Head: "f32"}) || a.MoE.DenseIntermediateSize != 128 {
		t.Errorf("unexpected import: %+v", c)
	}
	// Option defaults: context min(4096, 32768), 4 decode rows, 64 prefill rows.
	if c.Runtime.ContextLength != 4096 || c.Windows.MaxDecodeRows != 4 || c.Windows.PrefillRows != 64 {
		t.Errorf("defaults: runtime %+v windows %+v", c.Runtime, c.Windows)
	}
}

func TestImportHFFallbacks(t *testing.T) {
	base := oracleConfig(t, "tiny-a")
	// The pre-5.x form: no layer_types, rope fields at the top level, torch_dtype.
	old := editJSON(t, base, map[string]any{
		"layer_types": nil, "full_attention_interval": 2, "rope_parameters": nil,
		"rope_theta": 1e7, "partial_rotary_factor": 0.5, "dtype": nil, "torch_dtype": "float16",
		"head_dim": nil, "max_position_embeddings": 100000, "num_nextn_predict_layers": 1,
	})
	c, err := ImportHF(old, models.ImportOptions{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	a := c.Architecture
	wantTypes := []string{models.LayerLinearAttention, models.LayerFullAttention, models.LayerLinearAttention, models.LayerFullAttention}
	if !reflect.DeepEqual(a.LayerTypes, wantTypes) {
		t.Errorf("layer_types = %v, want %v", a.LayerTypes, wantTypes)
	}
	if a.Attention.RopeTheta != 1e7 || a.Attention.PartialRotaryFactor != 0.5 {
		t.Errorf("rope = %v, %v", a.Attention.RopeTheta, a.Attention.PartialRotaryFactor)
	}
	if a.Attention.HeadDim != 64/4 {
		t.Errorf("head_dim = %d, want hidden/heads = 16", a.Attention.HeadDim)
	}
	if c.Quant.Trunk != "f16" || c.Runtime.ContextLength != 32768 || a.MTP.NumLayers != 1 {
		t.Errorf("quant %+v, context %d, mtp %d", c.Quant, c.Runtime.ContextLength, a.MTP.NumLayers)
	}

	// Nothing said at all: theta 10000, qwen3_next's factor 0.25, bf16, interval 4.
	bare := editJSON(t, base, map[string]any{
		"layer_types": nil, "rope_parameters": nil, "partial_rotary_factor": nil, "dtype": nil,
		"intermediate_size": nil, "mlp_only_layers": nil,
	})
	c, err = ImportHF(bare, models.ImportOptions{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	a = c.Architecture
	if a.Attention.RopeTheta != 10000 || a.Attention.PartialRotaryFactor != 0.25 || c.Quant.Experts != "bf16" ||
		a.LayerTypes[3] != models.LayerFullAttention || a.MoE.DenseIntermediateSize != 0 || a.MoE.MLPOnlyLayers != nil {
		t.Errorf("defaults: %+v quant %+v", a, c.Quant)
	}

	// rope_parameters wins over the top level.
	both := editJSON(t, base, map[string]any{"rope_theta": 5.0, "partial_rotary_factor": 1.0})
	c, err = ImportHF(both, models.ImportOptions{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Architecture.Attention.RopeTheta != 10000 || c.Architecture.Attention.PartialRotaryFactor != 0.25 {
		t.Errorf("rope_parameters should win: %+v", c.Architecture.Attention)
	}
}

func TestImportHFErrors(t *testing.T) {
	base := oracleConfig(t, "tiny-a")
	for _, tc := range []struct {
		name  string
		edits map[string]any
		want  string
	}{
		{"missing key", map[string]any{"hidden_size": nil}, "cfg.json: hidden_size: missing (expected an integer)"},
		{"null key", map[string]any{"num_experts": json.RawMessage("null")}, "cfg.json: num_experts: is null (expected an integer)"},
		{"missing model_type", map[string]any{"model_type": nil}, "cfg.json: model_type: missing (expected one of qwen3_next, qwen4_exp, qwen4_exp_text)"},
		{"other model_type", map[string]any{"model_type": "llama"}, `cfg.json: model_type: "llama" is not supported (supported: qwen3_next, qwen4_exp, qwen4_exp_text)`},
		{"wrong type", map[string]any{"vocab_size": "512"}, `cfg.json: vocab_size: is "512" (expected an integer)`},
		{"fractional int", map[string]any{"vocab_size": 512.5}, "cfg.json: vocab_size: is 512.5 (expected an integer)"},
		{"dtype", map[string]any{"dtype": "float8_e4m3fn"}, `cfg.json: dtype: is "float8_e4m3fn" (expected float32, bfloat16 or float16)`},
		{"yarn", map[string]any{"rope_parameters": map[string]any{"rope_type": "yarn", "factor": 4.0}},
			`cfg.json: rope_parameters.rope_type: is "yarn" (expected "default": RoPE scaling is not supported)`},
		{"old yarn", map[string]any{"rope_scaling": map[string]any{"type": "yarn"}}, `cfg.json: rope_scaling: asks for "yarn"`},
		{"bias", map[string]any{"attention_bias": true}, "cfg.json: attention_bias: is true"},
		{"invalid result", map[string]any{"hidden_act": "gelu"}, `cfg.json: imported config is invalid: architecture.hidden_act: is "gelu"`},
		{"dense layers", map[string]any{"mlp_only_layers": []int{0}}, "dense MLP layers are not supported yet"},
	} {
		opts := tinyImportOptions
		opts.Name, opts.Source = "x", "cfg.json"
		_, err := ImportHF(editJSON(t, base, tc.edits), opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v\nwant it to contain %q", tc.name, err, tc.want)
		}
	}

	// Several problems are reported together.
	_, err := ImportHF(editJSON(t, base, map[string]any{"hidden_size": nil, "num_experts_per_tok": nil}), models.ImportOptions{Name: "x"})
	if err == nil || !strings.Contains(err.Error(), "hidden_size: missing") || !strings.Contains(err.Error(), "num_experts_per_tok: missing") {
		t.Errorf("err = %v", err)
	}

	for _, bad := range []string{"", "[1, 2]", "null", "{", `{"model_type": "qwen3_next"} trailing`} {
		_, err := ImportHF([]byte(bad), models.ImportOptions{Name: "x"})
		if err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestImportHFNullIsAbsent(t *testing.T) {
	// HF writes null for unset optional values; head_dim null means the fallback.
	data := []byte(strings.Replace(string(oracleConfig(t, "tiny-a")), `"head_dim": 32`, `"head_dim": null`, 1))
	c, err := ImportHF(data, models.ImportOptions{Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	if c.Architecture.Attention.HeadDim != 16 {
		t.Errorf("head_dim = %d, want the hidden/heads fallback 16", c.Architecture.Attention.HeadDim)
	}
}

func FuzzImportHF(f *testing.F) {
	for _, name := range []string{"tiny-a", "tiny-k512"} {
		data, err := os.ReadFile("../../testdata/oracles/" + name + "/config.json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"model_type": "qwen3_next", "num_hidden_layers": 1e12}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ImportHF(data, models.ImportOptions{Name: "fuzz"})
		if err == nil {
			if verr := c.Validate(); verr != nil {
				t.Fatalf("ImportHF returned an invalid config: %v", verr)
			}
		}
	})
}
