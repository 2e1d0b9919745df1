package models

import (
	"errors"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models/quant"
)

func loadTinyA(t *testing.T) *Config {
	t.Helper()
	c, err := Load("tiny-a/model.toml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestValidateRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(c *Config)
		want string
	}{
		{"empty name", func(c *Config) { c.Name = "" }, "name: is empty"},
		{"name with slash", func(c *Config) { c.Name = "a/b" }, `name: is "a/b"`},
		{"model type", func(c *Config) { c.Architecture.ModelType = "llama" },
			`architecture.model_type: is "llama" (expected "qwen3_next" or "qwen4_exp", the implemented model types)`},
		{"hidden size", func(c *Config) { c.Architecture.HiddenSize = -1 }, "architecture.hidden_size: is -1 (expected a positive integer)"},
		{"layer_types length", func(c *Config) { c.Architecture.LayerTypes = c.Architecture.LayerTypes[:3] },
			"architecture.layer_types: has 3 entries (expected one per layer: architecture.num_layers = 4)"},
		{"layer type name", func(c *Config) { c.Architecture.LayerTypes[1] = "sliding_attention" },
			`architecture.layer_types[1]: is "sliding_attention" (expected "linear_attention" or "full_attention" for qwen3_next)`},
		{"head_dim 0", func(c *Config) { c.Architecture.Attention.HeadDim = 0 }, "architecture.attention.head_dim: is 0 (expected a positive integer)"},
		{"gqa", func(c *Config) { c.Architecture.Attention.NumKVHeads = 3 },
			"architecture.attention.num_heads: is 4 (expected a multiple of architecture.attention.num_kv_heads = 3)"},
		{"gdn heads", func(c *Config) { c.Architecture.LinearAttention.NumValueHeads = 3 },
			"architecture.linear_attention.num_value_heads: is 3 (expected a multiple of architecture.linear_attention.num_key_heads = 2)"},
		{"top-k 0", func(c *Config) { c.Architecture.MoE.ExpertsPerToken = 0 }, "architecture.moe.experts_per_token: is 0 (expected 1 … architecture.moe.num_experts = 16)"},
		{"top-k > experts", func(c *Config) { c.Architecture.MoE.ExpertsPerToken = 17 }, "architecture.moe.experts_per_token: is 17"},
		{"rotary factor 0", func(c *Config) { c.Architecture.Attention.PartialRotaryFactor = 0 }, "architecture.attention.partial_rotary_factor: is 0 (expected a number in (0, 1])"},
		{"rotary factor > 1", func(c *Config) { c.Architecture.Attention.PartialRotaryFactor = 1.5 }, "architecture.attention.partial_rotary_factor: is 1.5"},
		{"odd rotary dim", func(c *Config) { c.Architecture.Attention.HeadDim = 36 }, // 36 × 0.25 = 9
			"architecture.attention.partial_rotary_factor: gives rotary dim 9"},
		{"rotary dim 0", func(c *Config) { c.Architecture.Attention.PartialRotaryFactor = 0.01 }, "gives rotary dim 0"},
		{"rope theta", func(c *Config) { c.Architecture.Attention.RopeTheta = 0 }, "architecture.attention.rope_theta: is 0 (expected a positive finite number)"},
		{"eps", func(c *Config) { c.Architecture.RMSNormEps = 0 }, "architecture.rms_norm_eps: is 0"},
		{"act", func(c *Config) { c.Architecture.HiddenAct = "gelu" }, `architecture.hidden_act: is "gelu" (expected "silu"`},
		{"quant name", func(c *Config) { c.Quant.Experts = "q3_zz" }, `quant.experts: is "q3_zz" (expected one of `},
		{"decode rows", func(c *Config) { c.Windows.MaxDecodeRows = 0 }, "windows.max_decode_rows: is 0 (expected a positive integer)"},
		{"prefill rows", func(c *Config) { c.Windows.PrefillRows = 0 }, "windows.prefill_rows: is 0"},
		{"context", func(c *Config) { c.Runtime.ContextLength = 0 }, "runtime.context_length: is 0"},
		{"threads", func(c *Config) { c.Runtime.Threads = -1 }, "runtime.threads: is -1 (expected an integer ≥ 0)"},
		{"sparse step", func(c *Config) { c.Architecture.MoE.DecoderSparseStep = 2 }, "architecture.moe.decoder_sparse_step: is 2 (expected 1: dense MLP layers are not supported yet)"},
		{"mlp only", func(c *Config) { c.Architecture.MoE.MLPOnlyLayers = []int{1} }, "architecture.moe.mlp_only_layers: is [1] (expected []: dense MLP layers are not supported yet)"},
		{"mtp", func(c *Config) { c.Architecture.MTP.NumLayers = -1 }, "architecture.mtp.num_layers: is -1"},
		{"conv kernel", func(c *Config) { c.Architecture.LinearAttention.ConvKernel = 0 }, "architecture.linear_attention.conv_kernel: is 0"},
	} {
		c := loadTinyA(t)
		tc.edit(c)
		err := c.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v\nwant it to contain %q", tc.name, err, tc.want)
			continue
		}
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: %v is not a *FieldError", tc.name, err)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := loadTinyA(t)
	c.Architecture.HiddenAct = "relu"
	c.Quant.Head = "int3"
	c.Windows.PrefillRows = -4
	err := c.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 problems, one per line, got:\n%v", err)
	}
	for i, field := range []string{"architecture.hidden_act:", "quant.head:", "windows.prefill_rows:"} {
		if !strings.HasPrefix(lines[i], field) {
			t.Errorf("line %d = %q, want it to start with %q", i, lines[i], field)
		}
	}
}

func TestParseNamesFileOnEveryLine(t *testing.T) {
	text := readModelText(t, "tiny-a")
	text = replaceOnce(t, text, `experts = "f32"`, `experts = "q3_zz"`)
	text = replaceOnce(t, text, "\"linear_attention\", \"full_attention\"]", "\"full_attention\"]")
	_, err := Parse([]byte(text), "models/tiny-a/model.toml")
	if err == nil {
		t.Fatal("no error")
	}
	want := "models/tiny-a/model.toml: architecture.layer_types: has 3 entries (expected one per layer: architecture.num_layers = 4)\n" +
		`models/tiny-a/model.toml: quant.experts: is "q3_zz" (expected one of ` + strings.Join(quant.Names(), ", ") + ")"
	if err.Error() != want {
		t.Errorf("err =\n%v\nwant\n%s", err, want)
	}
}
