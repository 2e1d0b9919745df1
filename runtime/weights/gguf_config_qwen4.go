package weights

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/ngram"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// qwen4ExpConfig builds the config of a qwen4exp GGUF without strata.config
// (what llama.cpp's converter writes) from its qwen4exp.* keys, as
// ConfigFromMetadata does for qwen3next: an HF config filled from the keys,
// imported. The keys' meanings are llama.cpp's (src/models/qwen4exp.cpp):
//   - layer types: attention.compress_ratios, non-zero on the QSA layers
//     (full_attention_interval must agree); the indexer's compress ratio is
//     that value, its budget attention.indexer.top_k, its KV heads the rows
//     of indexer.k_proj over attention.indexer.key_length (no key);
//   - hyper-connections: hyper_connection.count, .low_rank;
//   - PLE: ple.layers (0-based), ple.ngram_size, .heads_per_ngram,
//     .conv_kernel, .eos_token_id; embed_dim = the table's row width
//     (embedding_length_per_layer_input) × the hashed heads;
//   - MTP: nextn_predict_layers (llama.cpp's converter drops the MTP head, so
//     its files have none);
//   - the n-gram store's generating parameters, which no key holds, are
//     recovered from the stored hash constants (see ngramParams);
//   - defaults, as for qwen3next: hidden_act silu, the GDN output gate
//     sigmoid (llama.cpp's), norm_topk_prob true, split_ngram_parts HF's 512
//     (only a checkpoint's sharding: nothing reads it from a GGUF).
func qwen4ExpConfig(f *gguf.File) (*models.Config, error) {
	p, err := gguf.Qwen4ExpParamsOf(f)
	if err != nil {
		return nil, err
	}
	key := func(name string) string { return gguf.ArchQwen4Exp + "." + name }
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("gguf %s has no 2-D token_embd.weight to take the vocabulary size from", f.Path)
	}
	if p.HeadDim <= 0 || p.IndexerHeadDim <= 0 {
		return nil, fmt.Errorf("gguf %s: %s = %d, %s = %d: want positive head sizes", f.Path, key(gguf.KeyKeyLength), p.HeadDim, key(gguf.KeyIndexerKeyLength), p.IndexerHeadDim)
	}
	types := make([]string, p.Layers)
	ratio := 0
	for i, r := range p.CompressRatios {
		types[i] = models.LayerLinearAttention
		if r == 0 {
			continue
		}
		types[i] = models.LayerSparseAttention
		if ratio != 0 && r != ratio {
			return nil, fmt.Errorf("gguf %s: %s %v: the QSA layers' ratios differ (strata's indexer has one compress_ratio)", f.Path, key(gguf.KeyCompressRatios), p.CompressRatios)
		}
		ratio = r
		if n := p.FullAttentionInterval; n > 0 && (i+1)%n != 0 {
			return nil, fmt.Errorf("gguf %s: %s marks layer %d as QSA, but %s = %d does not", f.Path, key(gguf.KeyCompressRatios), i, key(gguf.KeyFullAttentionInterval), n)
		}
	}
	kvHeads := 0
	for i, t := range types {
		if t != models.LayerSparseAttention {
			continue
		}
		name := fmt.Sprintf("blk.%d.indexer.k_proj.weight", i)
		ti, ok := f.Tensor(name)
		if !ok || len(ti.Dims) != 2 || ti.Dims[1]%uint64(p.IndexerHeadDim) != 0 {
			return nil, fmt.Errorf("gguf %s: no 2-D %s whose rows are whole %s = %d heads, to take the indexer's KV heads from (no key holds them)", f.Path, name, key(gguf.KeyIndexerKeyLength), p.IndexerHeadDim)
		}
		kvHeads = int(ti.Dims[1]) / p.IndexerHeadDim
		break
	}
	hf := map[string]any{
		"model_type":                      "qwen4_exp_text",
		"hidden_size":                     p.Hidden,
		"num_hidden_layers":               p.Layers,
		"vocab_size":                      emb.Dims[1],
		"rms_norm_eps":                    shortest32(p.RMSEps),
		"hidden_act":                      "silu",
		"output_gate_type":                "sigmoid",
		"tie_word_embeddings":             !f.Has("output.weight"),
		"layer_types":                     types,
		"num_attention_heads":             p.Heads,
		"num_key_value_heads":             p.KVHeads,
		"head_dim":                        p.HeadDim,
		"rope_theta":                      shortest32(p.RopeTheta),
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
		"mtp_num_hidden_layers":           p.MTPLayers,
		"hc_count":                        p.HCCount,
		"hc_lowrank":                      p.HCLowRank,
		"indexer_n_heads":                 p.IndexerHeads,
		"indexer_kv_heads":                kvHeads,
		"indexer_head_dim":                p.IndexerHeadDim,
		"indexer_budget":                  p.IndexerTopK,
		"indexer_compress_ratio":          ratio,
		"ple_layer_ids":                   []int{},
		"torch_dtype":                     "float32",
	}
	if eos, err := f.Uint(gguf.KeyEOSID); err == nil {
		hf["eos_token_id"] = eos
	}
	if len(p.PLELayers) > 0 {
		if len(p.PLELayers) != 1 {
			return nil, fmt.Errorf("gguf %s: %s %v: strata reads one PLE layer's table", f.Path, key(gguf.KeyPLELayers), p.PLELayers)
		}
		if eos, ok := hf["eos_token_id"]; ok && eos != uint64(p.EOS) {
			return nil, fmt.Errorf("gguf %s: %s = %d but %s = %v: strata resets the n-grams on its first EOS", f.Path, key(gguf.KeyPLEEOS), p.EOS, gguf.KeyEOSID, eos)
		}
		hf["eos_token_id"] = p.EOS
		heads := (p.NgramSize - 1) * p.HeadsPerNgram
		np, err := ngramParams(f, p, emb.Dims[1])
		if err != nil {
			return nil, err
		}
		hf["ple_layer_ids"] = []int{p.PLELayers[0] + 1}
		hf["ple_embed_dim"] = p.PLERowWidth * heads
		hf["ple_conv_kernel_size"] = p.PLEConvKernel
		hf["ngram_size"] = p.NgramSize
		hf["heads_per_ngram"] = p.HeadsPerNgram
		hf["ngram_vocab_size_base"] = np.Base
		hf["make_ngram_vocab_size_divisible_by"] = np.DivisibleBy
		hf["seed"] = np.Seed
	}
	data, err := json.Marshal(hf)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", f.Path, err)
	}
	name := strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
	return models.ImportHF(data, models.ImportOptions{Name: name, Source: f.Path + " (qwen4exp metadata)"})
}

// ngramParams recovers the n-gram store's generating parameters, which no
// qwen4exp key holds, from what the file stores (HF 5.17.0's construction,
// models/ngram): ngram_vocab_size_base from the first head's prime (head j
// takes the (j+1)-th prime above base−1, so every base in (previous prime,
// P₀] builds the same table: HF's default 20,000,000 when it is one of them,
// else the roundest), make_ngram_vocab_size_divisible_by from the table's
// row count (HF's 128 when it gives that count, else the smallest power of
// two from 8 that does; any divisor giving that count builds the same table,
// only the artifact key sees which), and the seed by search (HF's 1234 first, then 0 … 2²²)
// for the stored multipliers. Whatever is chosen, the table it builds must
// equal the stored primes, offsets and multipliers, or this is an error
// naming the field.
func ngramParams(f *gguf.File, p gguf.Qwen4ExpParams, vocab uint64) (ngram.Params, error) {
	key := func(name string) string { return gguf.ArchQwen4Exp + "." + name }
	heads := (p.NgramSize - 1) * p.HeadsPerNgram
	if heads <= 0 || len(p.HeadVocabSizes) != heads || len(p.HeadOffsets) != heads || len(p.Multipliers) != p.NgramSize {
		return ngram.Params{}, fmt.Errorf("gguf %s: %s, %s, %s have %d, %d, %d entries; want %d heads and %d multipliers", f.Path,
			key(gguf.KeyPLEHeadVocabSizes), key(gguf.KeyPLEHeadOffsets), key(gguf.KeyPLEMultipliers),
			len(p.HeadVocabSizes), len(p.HeadOffsets), len(p.Multipliers), heads, p.NgramSize)
	}
	tab, ok := f.Tensor(gguf.NameNgramTable)
	if !ok || len(tab.Dims) != 2 {
		return ngram.Params{}, fmt.Errorf("gguf %s: no 2-D %s (the PLE layer's n-gram table)", f.Path, gguf.NameNgramTable)
	}
	rows := int64(tab.Dims[1])
	np := ngram.Params{VocabSize: int(vocab), NgramSize: p.NgramSize, HeadsPerNgram: p.HeadsPerNgram}

	p0 := p.HeadVocabSizes[0]
	lo := p0 - 1 // the previous prime, exclusive
	for lo > 1 && !ngram.IsPrime(lo) {
		lo--
	}
	np.Base = int(p0)
	if lo < 20_000_000 && 20_000_000 <= p0 {
		np.Base = 20_000_000
	} else {
		best := -1
		for b := lo + 1; b <= p0; b++ {
			if z := trailingZeros(b); z > best {
				best, np.Base = z, int(b)
			}
		}
	}

	var sum int64
	for _, v := range p.HeadVocabSizes {
		sum += v
	}
	fits := func(d int64) bool { return (sum+d-1)/d*d == rows }
	switch {
	case fits(128):
		np.DivisibleBy = 128
	default: // the smallest power of two from 8 (tiny configs' choice), else below
		for _, d := range []int64{8, 16, 32, 64, 256, 512, 1024, 4, 2, 1} {
			if fits(d) {
				np.DivisibleBy = int(d)
				break
			}
		}
	}
	if np.DivisibleBy == 0 {
		return np, fmt.Errorf("gguf %s: %s has %d rows, not the %d the stored %s add up to rounded to a power of two: no make_ngram_vocab_size_divisible_by fits (no key holds it)", f.Path, gguf.NameNgramTable, rows, sum, key(gguf.KeyPLEHeadVocabSizes))
	}

	np.Seed = -1
	for s := -1; s < 1<<22; s++ {
		try := np
		try.Seed = max(s, 0)
		if s < 0 {
			try.Seed = 1234 // HF's default first
		}
		if try.VocabSize > 0 && slices.Equal(ngram.Multipliers(try), p.Multipliers) {
			np.Seed = try.Seed
			break
		}
	}
	if np.Seed < 0 {
		return np, fmt.Errorf("gguf %s: %s %v match no seed in 0 … %d (the PLE seed has no key: pass a model config)", f.Path, key(gguf.KeyPLEMultipliers), p.Multipliers, 1<<22)
	}
	t, err := ngram.New(np)
	if err != nil {
		return np, fmt.Errorf("gguf %s: %w", f.Path, err)
	}
	if !slices.Equal(t.Primes, p.HeadVocabSizes) || !slices.Equal(t.Offsets, p.HeadOffsets) {
		return np, fmt.Errorf("gguf %s: %s / %s are not HF's n-gram construction for ngram_vocab_size_base %d (no key holds it): pass a model config", f.Path, key(gguf.KeyPLEHeadVocabSizes), key(gguf.KeyPLEHeadOffsets), np.Base)
	}
	return np, nil
}

// shortest32 is the float32 v as the shortest decimal that reads back as it
// (1e-06, not 9.99999997e-07): the value the model's config.json wrote,
// which the file could keep only as a float32.
func shortest32(v float64) float64 {
	d, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', -1, 32), 64)
	if err != nil {
		return v
	}
	return d
}

func trailingZeros(n int64) int {
	z := 0
	for n > 0 && n%10 == 0 {
		n /= 10
		z++
	}
	return z
}
