package convert

import (
	"slices"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// The GGUF layout of the real Qwen3.8-Flash-Next under a 4-bit n-gram table,
// planned only (writing it takes 100+ GB): the table is one [160, 320001536]
// IQ4_NL tensor of 28,800,138,240 bytes, the size third-party readers
// measured in llama.cpp's files; the hash parameters are qwen4_exp.md §3.1's.
func TestPlanFlashNext(t *testing.T) {
	c, err := models.Embedded("qwen38-flash-next")
	if err != nil {
		t.Fatal(err)
	}
	if c.Quant, err = ParsePlan(c.Quant, "experts=iq2_xs,trunk=q8_0,embed=iq4_nl"); err != nil {
		t.Fatal(err)
	}
	cfg, tensors, kv, err := plan(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]tensor{}
	for _, tt := range tensors {
		if _, dup := byName[tt.info.Name]; dup {
			t.Fatalf("tensor %s planned twice", tt.info.Name)
		}
		byName[tt.info.Name] = tt
	}
	tab, ok := byName[arch.NameNgramTable]
	if !ok || !tab.table || !slices.Equal(tab.info.Dims, []uint64{160, 320001536}) || tab.info.Type.Name != "iq4_nl" {
		t.Fatalf("n-gram table: %+v", tab.info)
	}
	if n := int64(tab.spec.Shape[0]) * int64(tab.rl.RowBytes()); n != 28800138240 {
		t.Errorf("n-gram table: %d bytes, want 28,800,138,240", n)
	}
	for name, dims := range map[string][]uint64{
		"blk.0.attn_qkv.weight":          {2560, 10240},
		"blk.0.attn_gate.weight":         {2560, 6144},
		"blk.0.ssm_beta.weight":          {2560, 48},
		"blk.0.ssm_out.weight":           {6144, 2560},
		"blk.1.ple_key.weight":           {2560, 10240},
		"blk.1.ple_conv1d.weight":        {4, 10240},
		"blk.3.indexer.q_proj.weight":    {2560, 512},
		"blk.3.indexer.k_proj.weight":    {2560, 128},
		"blk.47.hc_ffn_inject.weight":    {10240, 4},
		"output_hc_down.weight":          {10240, 320},
		"blk.48.nextn.hc_head_up.weight": {320, 10240},
		"blk.48.ffn_down_exps.weight":    {640, 2560, 512}, // rows of 640: not whole iq2_xs blocks
	} {
		if tt, ok := byName[name]; !ok || !slices.Equal(tt.info.Dims, dims) {
			t.Errorf("%s: %+v, want dims %v", name, tt.info, dims)
		}
	}
	// llama-quantize's fallback for iq2_xs on rows of 640: iq4_nl, not padding.
	if f := byName["blk.48.ffn_down_exps.weight"].info.Type.Name; f != "iq4_nl" {
		t.Errorf("blk.48.ffn_down_exps.weight is %s, want iq4_nl (llama.cpp's fallback)", f)
	}
	if n := len(byName["blk.0.ssm_out.weight"].cols); n != 48 {
		t.Errorf("ssm_out: %d column runs, want one per value head (48)", n)
	}
	if cfg.Architecture.NumLayers != 48 || len(tensors) != len(byName) {
		t.Errorf("%d layers, %d tensors", cfg.Architecture.NumLayers, len(tensors))
	}
	meta := map[string]any{}
	for _, e := range kv {
		meta[e.Key] = e.Value
	}
	// uint64 arrays: llama.cpp's qwen4exp loader refuses int64 ones.
	for key, want := range map[string][]uint64{
		"qwen4exp.ple.layer_multipliers": {23703573157769, 20109073645365, 8052911324071},
		"qwen4exp.ple.head_vocab_sizes": {20000003, 20000023, 20000033, 20000047, 20000059, 20000063, 20000069, 20000077,
			20000081, 20000093, 20000107, 20000147, 20000153, 20000159, 20000161, 20000171},
		"qwen4exp.ple.head_offsets": {0, 20000003, 40000026, 60000059, 80000106, 100000165, 120000228, 140000297,
			160000374, 180000455, 200000548, 220000655, 240000802, 260000955, 280001114, 300001275},
	} {
		a, ok := meta[key].(gguf.Array)
		if got, _ := a.Values.([]uint64); !ok || !slices.Equal(got, want) {
			t.Errorf("%s = %v, want %v", key, meta[key], want)
		}
	}
	for key, want := range map[string]any{
		"general.architecture":                      "qwen4exp",
		"qwen4exp.attention.indexer.top_k":          uint32(2048),
		"qwen4exp.embedding_length_per_layer_input": uint32(160),
		"qwen4exp.ple.eos_token_id":                 uint32(248044),
		"qwen4exp.hyper_connection.low_rank":        uint32(320),
		"qwen4exp.full_attention_interval":          uint32(4),
		"qwen4exp.nextn_predict_layers":             uint32(1),
		gguf.KeyQwen4ExpNames:                       uint32(gguf.Qwen4ExpNamesVersion),
	} {
		if meta[key] != want {
			t.Errorf("%s = %v, want %v", key, meta[key], want)
		}
	}
}
