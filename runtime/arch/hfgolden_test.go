package arch

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/hfimport.golden")

// hfImport is the importer the golden test holds to its recorded output.
func hfImport(data []byte, opts models.ImportOptions) (*models.Config, error) {
	return ImportHF(data, opts)
}

// hfCase is one config.json the golden test imports: a file of the tree,
// or one edited.
type hfCase struct {
	name string
	data []byte
}

func hfCases(t *testing.T) []hfCase {
	root := filepath.Join("..", "..")
	var files []string
	for _, pat := range []string{"testdata/oracles/*/config.json", "models/*/config.json"} {
		m, err := filepath.Glob(filepath.Join(root, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	if len(files) < 4 {
		t.Fatalf("config.json files %v: want the oracles' and tiny-go's", files)
	}
	var cases []hfCase
	read := func(rel string) []byte {
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	for _, f := range files {
		rel, _ := filepath.Rel(root, f)
		cases = append(cases, hfCase{filepath.ToSlash(rel), read(rel)})
	}
	next := read("testdata/oracles/tiny-a/config.json")
	q4 := read("testdata/oracles/q4-a/config.json")
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	edits := []struct {
		name  string
		base  []byte
		edits map[string]any
	}{
		{"missing hidden_size", next, map[string]any{"hidden_size": nil}},
		{"null num_experts", next, map[string]any{"num_experts": raw("null")}},
		{"missing model_type", next, map[string]any{"model_type": nil}},
		{"null model_type", next, map[string]any{"model_type": raw("null")}},
		{"numeric model_type", next, map[string]any{"model_type": 3}},
		{"other model_type", next, map[string]any{"model_type": "llama"}},
		{"string vocab_size", next, map[string]any{"vocab_size": "512"}},
		{"fractional vocab_size", next, map[string]any{"vocab_size": 512.5}},
		{"huge vocab_size", next, map[string]any{"vocab_size": 1e300}},
		{"fp8 dtype", next, map[string]any{"dtype": "float8_e4m3fn"}},
		{"bad torch_dtype", next, map[string]any{"dtype": nil, "torch_dtype": "int8"}},
		{"float16 torch_dtype", next, map[string]any{"dtype": nil, "torch_dtype": "float16"}},
		{"bfloat16", next, map[string]any{"dtype": "bfloat16"}},
		{"yarn", next, map[string]any{"rope_parameters": map[string]any{"rope_type": "yarn", "factor": 4.0}}},
		{"rope_parameters not an object", next, map[string]any{"rope_parameters": 3}},
		{"rope_parameters bad theta", next, map[string]any{"rope_parameters": map[string]any{"rope_theta": "x"}}},
		{"old yarn", next, map[string]any{"rope_scaling": map[string]any{"type": "yarn"}}},
		{"rope_scaling default", next, map[string]any{"rope_scaling": map[string]any{"rope_type": "default"}}},
		{"rope_scaling string", next, map[string]any{"rope_scaling": "linear"}},
		{"attention_bias", next, map[string]any{"attention_bias": true}},
		{"attention_bias string", next, map[string]any{"attention_bias": "no"}},
		{"gelu", next, map[string]any{"hidden_act": "gelu"}},
		{"dense layers", next, map[string]any{"mlp_only_layers": []int{0}}},
		{"mlp_only_layers strings", next, map[string]any{"mlp_only_layers": []string{"a"}}},
		{"two missing", next, map[string]any{"hidden_size": nil, "num_experts_per_tok": nil}},
		{"many missing", next, map[string]any{"num_hidden_layers": nil, "vocab_size": nil, "head_dim": nil, "linear_conv_kernel_dim": nil, "tie_word_embeddings": nil, "norm_topk_prob": nil, "decoder_sparse_step": nil, "rms_norm_eps": nil, "hidden_act": nil}},
		{"pre-5.x form", next, map[string]any{
			"layer_types": nil, "full_attention_interval": 2, "rope_parameters": nil,
			"rope_theta": 1e7, "partial_rotary_factor": 0.5, "dtype": nil, "torch_dtype": "float16",
			"head_dim": nil, "max_position_embeddings": 100000, "num_nextn_predict_layers": 1,
		}},
		{"nothing said", next, map[string]any{
			"layer_types": nil, "rope_parameters": nil, "partial_rotary_factor": nil, "dtype": nil,
			"intermediate_size": nil, "mlp_only_layers": nil,
		}},
		{"rope_parameters win", next, map[string]any{"rope_theta": 5.0, "partial_rotary_factor": 1.0}},
		{"head_dim null", next, map[string]any{"head_dim": raw("null")}},
		{"interval 0", next, map[string]any{"layer_types": nil, "full_attention_interval": 0}},
		{"interval string", next, map[string]any{"layer_types": nil, "full_attention_interval": "4"}},
		{"too many layers", next, map[string]any{"layer_types": nil, "num_hidden_layers": 1e6}},
		{"layer_types numbers", next, map[string]any{"layer_types": []int{1, 2}}},
		{"eos list", next, map[string]any{"eos_token_id": []int{1, 2}}},
		{"eos string", next, map[string]any{"eos_token_id": "1"}},
		{"no eos", next, map[string]any{"eos_token_id": nil}},
		{"mtp 2", next, map[string]any{"num_nextn_predict_layers": 2}},
		{"norm_topk false", next, map[string]any{"norm_topk_prob": false}},
		{"qwen3_next output_gate_type", next, map[string]any{"output_gate_type": "sigmoid"}},
		{"qwen3_next mtp_num_hidden_layers", next, map[string]any{"mtp_num_hidden_layers": 1}},
		{"q4 as qwen4_exp", q4, map[string]any{"model_type": "qwen4_exp"}},
		{"q4 text_config bad", q4, map[string]any{"model_type": "qwen4_exp", "text_config": 3}},
		{"q4 text_config null", q4, map[string]any{"model_type": "qwen4_exp", "text_config": raw("null")}},
		{"q4 text_config on _text", q4, map[string]any{"text_config": map[string]any{"hidden_size": 8}}},
		{"q4 old layer names", q4, map[string]any{"layer_types": []string{"linear_attention", "linear_attention", "hybrid_indexed", "deepseek_sparse_attention"}}},
		{"q4 full_attention name", q4, map[string]any{"layer_types": []string{"linear_attention", "linear_attention", "linear_attention", "full_attention"}}},
		{"q4 derived layers", q4, map[string]any{"layer_types": nil}},
		{"q4 derived interval 2", q4, map[string]any{"layer_types": nil, "full_attention_interval": 2}},
		{"q4 ple ids unsorted", q4, map[string]any{"ple_layer_ids": []int{3, 2, 3}}},
		{"q4 no ple", q4, map[string]any{"ple_layer_ids": []int{}}},
		{"q4 ple ids absent", q4, map[string]any{"ple_layer_ids": nil}},
		{"q4 ple defaults", q4, map[string]any{"ple_embed_dim": nil, "ple_conv_kernel_size": nil, "ngram_size": nil, "heads_per_ngram": nil,
			"ngram_vocab_size_base": nil, "make_ngram_vocab_size_divisible_by": nil, "seed": nil, "split_ngram_parts": nil}},
		{"q4 ple bad", q4, map[string]any{"ngram_size": "3", "seed": 1.5}},
		{"q4 hc defaults", q4, map[string]any{"hc_count": nil, "hc_lowrank": nil}},
		{"q4 indexer missing", q4, map[string]any{"indexer_n_heads": nil, "indexer_kv_heads": nil, "indexer_head_dim": nil, "indexer_budget": nil, "indexer_compress_ratio": nil}},
		{"q4 gate default", q4, map[string]any{"output_gate_type": nil}},
		{"q4 gate bad", q4, map[string]any{"output_gate_type": 1}},
		{"q4 norm_topk default", q4, map[string]any{"norm_topk_prob": nil}},
		{"q4 norm_topk false", q4, map[string]any{"norm_topk_prob": false}},
		{"q4 decoder_sparse_step", q4, map[string]any{"decoder_sparse_step": 2}},
		{"q4 mtp", q4, map[string]any{"mtp_num_hidden_layers": 1, "num_nextn_predict_layers": 3}},
		{"q4 nextn only", q4, map[string]any{"num_nextn_predict_layers": 1}},
		{"q4 factor default", q4, map[string]any{"rope_parameters": nil}},
		{"q4 many missing", q4, map[string]any{"hidden_size": nil, "num_experts": nil, "indexer_budget": nil, "rms_norm_eps": nil}},
	}
	for _, e := range edits {
		cases = append(cases, hfCase{e.name, editJSON(t, e.base, e.edits)})
	}
	wrapped := editJSON(t, []byte(`{"model_type": "qwen4_exp", "dtype": "float16"}`), map[string]any{"text_config": json.RawMessage(q4)})
	cases = append(cases, hfCase{"q4 nested in text_config", wrapped})
	nestedYarn := editJSON(t, q4, map[string]any{"rope_parameters": map[string]any{"rope_type": "yarn"}, "vocab_size": "x"})
	cases = append(cases, hfCase{"q4 nested, errors", editJSON(t, []byte(`{"model_type": "qwen4_exp"}`), map[string]any{"text_config": json.RawMessage(nestedYarn)})})
	for _, bad := range []string{"", "[1, 2]", "null", "{", `{"model_type": "qwen3_next"} trailing`, `{"model_type": "qwen3_next"}`, `{}`} {
		cases = append(cases, hfCase{"bad input " + bad, []byte(bad)})
	}
	return cases
}

// TestHFImportGolden holds the HF importer to the configs (or the set of
// errors) it produced for every config.json in the tree and edits of them,
// recorded in
// testdata/hfimport.golden (go test -run HFImportGolden -update rewrites it).
func TestHFImportGolden(t *testing.T) {
	var b strings.Builder
	for _, tc := range hfCases(t) {
		b.WriteString("=== " + tc.name + "\n")
		c, err := hfImport(tc.data, models.ImportOptions{Name: "golden", Source: "cfg.json"})
		if err != nil {
			// The lines of a report in order: which problems, not the order
			// the table's rows meet them in.
			lines := strings.Split(err.Error(), "\n")
			slices.Sort(lines)
			b.WriteString("error:\n" + strings.Join(lines, "\n") + "\n")
			continue
		}
		out, err := json.MarshalIndent(c, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		b.Write(out)
		b.WriteString("\n")
	}
	path := filepath.Join("testdata", "hfimport.golden")
	if *updateGolden {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got != string(want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("import differs from %s at line %d:\n got %s\nwant %s", path, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("import differs from %s: %d lines, want %d", path, len(gl), len(wl))
	}
}
