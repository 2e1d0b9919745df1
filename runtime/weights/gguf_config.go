package weights

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// ConfigFromMetadata builds the model config of a qwen3next GGUF that has no
// strata.config (any llama.cpp file) from its qwen3next.* keys, the way
// strata import-hf builds one from config.json: it fills an HF config from
// the keys and imports it, so defaults and validation are the importer's.
// What llama.cpp's keys do not say is derived or defaulted here
// (docs/gguf.md lists them):
//   - vocab_size: token_embd.weight's row count; tie_word_embeddings: the
//     file has no output.weight;
//   - partial_rotary_factor: rope.dimension_count / attention.key_length;
//   - hidden_act silu, norm_topk_prob true, decoder_sparse_step 1 (every
//     layer MoE), as Qwen3-Next's released configs; no MTP head;
//   - eos_token_id: tokenizer.ggml.eos_token_id when present;
//   - max_position_embeddings: context_length (the runtime context is capped
//     at 32768 as for any import).
//
// The quant plan's classes are placeholders: the formats are the file's own
// (WithFileFormats).
func ConfigFromMetadata(f *gguf.File) (*models.Config, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil, err
	}
	if arch == gguf.ArchQwen4Exp {
		return qwen4ExpConfig(f)
	}
	if arch != gguf.ArchQwenNext {
		return nil, fmt.Errorf("gguf %s has no %s metadata, and a model config is derived from metadata only for %s and %s files (general.architecture is %q): pass its model config", f.Path, gguf.KeyConfig, gguf.ArchQwenNext, gguf.ArchQwen4Exp, arch)
	}
	p, err := gguf.QwenNextParamsOf(f)
	if err != nil {
		return nil, err
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("gguf %s has no 2-D token_embd.weight to take the vocabulary size from", f.Path)
	}
	if p.HeadDim <= 0 {
		return nil, fmt.Errorf("gguf %s: %s.%s = %d, want a positive head size", f.Path, gguf.ArchQwenNext, gguf.KeyKeyLength, p.HeadDim)
	}
	hf := map[string]any{
		"model_type":                      models.TypeQwen3Next,
		"hidden_size":                     p.Hidden,
		"num_hidden_layers":               p.Layers,
		"vocab_size":                      emb.Dims[1],
		"rms_norm_eps":                    p.RMSEps,
		"hidden_act":                      "silu",
		"tie_word_embeddings":             !f.Has("output.weight"),
		"full_attention_interval":         p.FullAttentionInterval,
		"num_attention_heads":             p.Heads,
		"num_key_value_heads":             p.KVHeads,
		"head_dim":                        p.HeadDim,
		"rope_theta":                      p.RopeTheta,
		"partial_rotary_factor":           float64(p.RopeDim) / float64(p.HeadDim),
		"max_position_embeddings":         p.ContextLength,
		"linear_num_key_heads":            p.KeyHeads,
		"linear_num_value_heads":          p.ValueHeads,
		"linear_key_head_dim":             p.StateSize,
		"linear_value_head_dim":           p.ValueHeadDim,
		"linear_conv_kernel_dim":          p.ConvKernel,
		"num_experts":                     p.Experts,
		"num_experts_per_tok":             p.ExpertsUsed,
		"moe_intermediate_size":           p.ExpertFFN,
		"shared_expert_intermediate_size": p.SharedFFN,
		"norm_topk_prob":                  true,
		"decoder_sparse_step":             1,
		"intermediate_size":               p.FFN,
		"torch_dtype":                     "float32",
	}
	if eos, err := f.Uint(gguf.KeyEOSID); err == nil {
		hf["eos_token_id"] = eos
	}
	data, err := json.Marshal(hf)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", f.Path, err)
	}
	name := strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
	c, err := models.ImportHF(data, models.ImportOptions{Name: name, Source: f.Path + " (qwen3next metadata)"})
	if err != nil {
		return nil, err
	}
	return c, nil
}
