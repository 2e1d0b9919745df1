package arch

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/ngram"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// The n-gram table's hash parameters (qwen4exp keys).
const (
	keyMultipliers    = "ple.layer_multipliers"
	keyHeadVocabSizes = "ple.head_vocab_sizes"
	keyHeadOffsets    = "ple.head_offsets"
)

// NgramKeys are the full keys of the n-gram table's hash parameters
// (multipliers, head vocab sizes, head offsets), which a reader compares
// with the ones computed from the config.
var NgramKeys = [3]string{"qwen4exp." + keyMultipliers, "qwen4exp." + keyHeadVocabSizes, "qwen4exp." + keyHeadOffsets}

// Qwen4Exp is Qwen3.8-Flash-Next (HF model_type qwen4_exp or
// qwen4_exp_text, GGUF architecture qwen4exp, llama.cpp's
// src/models/qwen4exp.cpp): Gated DeltaNet layers and sparse (QSA) attention
// layers with an indexer, hyper-connections, an MTP head and a PLE layer
// reading a hashed n-gram store. The keys' meanings are llama.cpp's;
// the name map below says where its names come from. What no
// key says: the layer types come from attention.compress_ratios (non-zero on
// the QSA layers), the indexer's KV heads from indexer.k_proj's rows, the
// n-gram store's generating parameters from its stored hash constants
// (ngramParams); hidden_act silu, the GDN output gate sigmoid (llama.cpp's),
// norm_topk_prob true and split_ngram_parts 512 (HF's defaults; only a
// checkpoint's sharding: nothing reads it from a GGUF).
var Qwen4Exp = &Arch{
	GGUF:      "qwen4exp",
	ModelType: models.TypeQwen4Exp,
	HFTypes:   []string{models.TypeQwen4Exp, "qwen4_exp_text"},
	// The multimodal release (model_type qwen4_exp) nests the decoder's
	// fields in text_config.
	hfNested: "text_config",
	Params: []Param{
		pBlockCount,
		pContext,
		pHidden,
		pHeads,
		pKVHeads,
		pKeyLength,
		pValueLength,
		rmsEps(true),
		ropeTheta(true),
		ropeDim(1.0), // 5.17.0's rotary code default
		{Key: "rope.dimension_sections", HF: "rope_parameters.mrope_section", Field: "(none: HF's default; for text every section sees the same position, but llama.cpp's loader wants the key)",
			Type: Int32s, Optional: true,
			Get: func(*models.Architecture) (Value, error) { return ints([]int{11, 11, 10, 0}), nil }},
		pExperts,
		pExpertsUsed,
		pExpertFFN,
		pSharedFFN,
		pConvKernel,
		pInnerSize,
		pStateSize,
		pTimeStepRank,
		pGroupCount,
		pInterval(models.LayerSparseAttention, nil, qwen4LayerTypes), // a reader takes the layer types from compress_ratios, which must agree
		// The HF defaults below are 5.17.0's (configuration_qwen4_exp.py).
		hfOr(4, checked(field("hyper_connection.count", "hc_count", "architecture.hyper_connections.count", func(a *models.Architecture) *int { return &a.HyperConnections.Count }))),
		hfOr(320, checked(field("hyper_connection.low_rank", "hc_lowrank", "architecture.hyper_connections.low_rank", func(a *models.Architecture) *int { return &a.HyperConnections.LowRank }))),
		checked(field("attention.indexer.head_count", "indexer_n_heads", "architecture.indexer.heads", func(a *models.Architecture) *int { return &a.Indexer.Heads })),
		checked(headSize("attention.indexer.key_length", "indexer_head_dim", "architecture.indexer.head_dim", func(a *models.Architecture) *int { return &a.Indexer.HeadDim })),
		checked(field("attention.indexer.top_k", "indexer_budget", "architecture.indexer.budget (in tokens)", func(a *models.Architecture) *int { return &a.Indexer.Budget })),
		checked(Param{Key: "attention.compress_ratios", HF: "indexer_compress_ratio", Field: "architecture.layer_types and architecture.indexer.compress_ratio", Type: Int32s,
			Says: "compress_ratio on the sparse-attention layers",
			FromHF: func(a *models.Architecture, r *hfReader) {
				a.Indexer.CompressRatio = r.reqInt("indexer_compress_ratio")
			},
			Get: func(a *models.Architecture) (Value, error) {
				r := make([]int, a.NumLayers)
				for i, t := range a.LayerTypes {
					if t == models.LayerSparseAttention {
						r[i] = a.Indexer.CompressRatio
					}
				}
				return ints(r), nil
			},
			Set: setCompressRatios}),
		checked(Param{Key: "ple.layers", HF: "ple_layer_ids", Field: "architecture.ple.layer_ids (0-based here)", Type: Int32s,
			Says: "0-based ple.layer_ids",
			FromHF: func(a *models.Architecture, r *hfReader) {
				ids := r.intList("ple_layer_ids")
				slices.Sort(ids)
				if ids = slices.Compact(ids); len(ids) > 0 { // HF sorts and de-duplicates in __post_init__
					a.PLE.LayerIDs = ids
				}
			},
			Get: func(a *models.Architecture) (Value, error) {
				var ids []int
				for _, id := range a.PLE.LayerIDs {
					ids = append(ids, id-1)
				}
				return ints(ids), nil
			},
			Set: func(a *models.Architecture, v Value, m Meta) error {
				if len(v.Ints) > 1 {
					return fmt.Errorf("gguf %s: %s %v: strata reads one PLE layer's table", m.f.Path, m.Key("ple.layers"), v.Ints)
				}
				if len(v.Ints) == 1 {
					a.PLE.LayerIDs = []int{int(v.Ints[0]) + 1}
				}
				return nil
			}}),
		ple(hfOr(3, checked(field("ple.ngram_size", "ngram_size", "architecture.ple.ngram_size", func(a *models.Architecture) *int { return &a.PLE.NgramSize })))),
		ple(hfOr(8, checked(field("ple.heads_per_ngram", "heads_per_ngram", "architecture.ple.heads_per_ngram", func(a *models.Architecture) *int { return &a.PLE.HeadsPerNgram })))),
		ple(hfOr(4, checked(field("ple.conv_kernel", "ple_conv_kernel_size", "architecture.ple.conv_kernel", func(a *models.Architecture) *int { return &a.PLE.ConvKernel })))),
		ple(checked(Param{Key: "ple.eos_token_id", HF: "eos_token_id", Field: "architecture.eos_token_ids[0] (the n-grams reset on it)", Type: Uint,
			Get: func(a *models.Architecture) (Value, error) {
				if len(a.EOSTokenIDs) == 0 {
					return Value{Int: -1}, nil
				}
				return Value{Int: a.EOSTokenIDs[0]}, nil
			},
			Set: func(a *models.Architecture, v Value, m Meta) error {
				eos, err := eosOf(m.f)
				if err != nil {
					return err
				}
				if eos >= 0 && eos != v.Int {
					return fmt.Errorf("gguf %s: %s = %d but %s = %d: strata resets the n-grams on its first EOS", m.f.Path, m.Key("ple.eos_token_id"), v.Int, gguf.KeyEOSID, eos)
				}
				a.EOSTokenIDs = []int{v.Int}
				return nil
			}})),
		// One head's row of the table: embed_dim = the row width × the hashed heads.
		ple(checked(Param{Key: "embedding_length_per_layer_input", HF: "ple_embed_dim", Field: "architecture.ple.embed_dim / the hashed heads", Type: Uint,
			FromHF: func(a *models.Architecture, r *hfReader) { a.PLE.EmbedDim = r.intOr("ple_embed_dim", a.HiddenSize) },
			Get:    func(a *models.Architecture) (Value, error) { return Value{Int: a.PLE.RowWidth()}, nil },
			Set: func(a *models.Architecture, v Value, _ Meta) error {
				a.PLE.EmbedDim = v.Int * (a.PLE.NgramSize - 1) * a.PLE.HeadsPerNgram
				return nil
			}})),
		// The n-gram table's hash parameters, as HF computes them from the
		// config; a reader recovers the config's from them (ngramParams).
		ple(Param{Key: keyMultipliers, HF: "seed", Field: "architecture.ple.seed (via ngram.Multipliers)", Type: Uint64s,
			FromHF: func(a *models.Architecture, r *hfReader) { a.PLE.Seed = r.intOr("seed", 1234) },
			Get: func(a *models.Architecture) (Value, error) {
				h, err := ngram.New(a.NgramParams(0))
				return Value{Ints: h.Multipliers}, err
			}}),
		ple(Param{Key: keyHeadVocabSizes, HF: "ngram_vocab_size_base", Field: "architecture.ple.vocab_size_base (via the heads' primes)", Type: Uint64s,
			FromHF: func(a *models.Architecture, r *hfReader) {
				a.PLE.VocabSizeBase = r.intOr("ngram_vocab_size_base", 20_000_000)
			},
			Get: func(a *models.Architecture) (Value, error) {
				h, err := ngram.New(a.NgramParams(0))
				return Value{Ints: h.Primes}, err
			}}),
		ple(Param{Key: keyHeadOffsets, HF: "make_ngram_vocab_size_divisible_by", Field: "architecture.ple.vocab_divisible_by (via the table's rows)", Type: Uint64s,
			FromHF: func(a *models.Architecture, r *hfReader) {
				a.PLE.VocabDivisibleBy = r.intOr("make_ngram_vocab_size_divisible_by", 128)
			},
			Get: func(a *models.Architecture) (Value, error) {
				h, err := ngram.New(a.NgramParams(0))
				return Value{Ints: h.Offsets}, err
			}}),
		pNextN(func(a *models.Architecture, v Value, _ Meta) error { a.MTP.NumLayers = v.Int; return nil },
			func(a *models.Architecture, r *hfReader) {
				r.int("num_nextn_predict_layers") // vLLM's key, checked; qwen4_exp's own is mtp_num_hidden_layers
				a.MTP.NumLayers, _ = r.int("mtp_num_hidden_layers")
			}),
		// HF only.
		hfVocab,
		hfAct,
		hfTie,
		hfEOS,
		hfAttentionBias,
		hfRopeScaling,
		hfOnlyInt("indexer_kv_heads", "architecture.indexer.kv_heads (GGUF: indexer.k_proj's rows)", func(a *models.Architecture) *int { return &a.Indexer.KVHeads }),
		ple(hfOnly("split_ngram_parts", "architecture.ple.split_parts (a checkpoint's sharding)", func(a *models.Architecture, r *hfReader) {
			a.PLE.SplitParts = r.intOr("split_ngram_parts", 512)
		})),
		// The GDN output gate: hidden_act unless output_gate_type says otherwise.
		hfOnly("output_gate_type", "architecture.linear_attention.gate_act", func(a *models.Architecture, r *hfReader) {
			a.LinearAttention.GateAct = a.HiddenAct
			if g, ok := r.str("output_gate_type"); ok {
				a.LinearAttention.GateAct = g
			}
		}),
		hfOnly("norm_topk_prob", "architecture.moe.norm_topk_prob", func(a *models.Architecture, r *hfReader) {
			a.MoE.NormTopKProb = true
			if b, ok := r.bool("norm_topk_prob"); ok {
				a.MoE.NormTopKProb = b
			}
		}),
		hfMLPOnly,
		hfDenseFFN,
	},
	hfFixed: func(a *models.Architecture) {
		a.Attention.OutputGate = true // both families gate the attention output
		a.MoE.DecoderSparseStep = 1   // every qwen4_exp layer is MoE
	},
	Extra: []gguf.KV{{Key: gguf.KeyQwen4ExpNames, Value: uint32(gguf.Qwen4ExpNamesVersion)}},
	writable: func(a *models.Architecture) []error {
		var errs []error
		if la := a.LinearAttention; la.GateAct != "sigmoid" {
			errs = append(errs, fmt.Errorf("linear_attention.gate_act is %q (qwen4exp GGUF has no key for it; llama.cpp uses sigmoid)", la.GateAct))
		}
		if ids := a.PLE.LayerIDs; len(ids) > 1 {
			errs = append(errs, fmt.Errorf("ple.layer_ids %v: qwen4exp GGUF holds one PLE layer's n-gram table (%s) and hash parameters: %w", ids, NameNgramTable, ErrUnsupported))
		}
		return gatedEvery(a, "qwen4exp", models.LayerSparseAttention, errs)
	},
	opened: func(f *gguf.File) error {
		if v, err := f.Uint(gguf.KeyQwen4ExpNames); err == nil && v != gguf.Qwen4ExpNamesVersion {
			return fmt.Errorf("gguf %s: %s = %d, but this strata reads revision %d of its qwen4exp names (a newer strata wrote it?)", f.Path, gguf.KeyQwen4ExpNames, v, gguf.Qwen4ExpNamesVersion)
		}
		return nil
	},
	finish: func(f *gguf.File, a *models.Architecture, m Meta) error {
		if err := qwenDefaults(f, a, "sigmoid"); err != nil {
			return err
		}
		// The indexer's KV heads: no key holds them.
		if l := slices.Index(a.LayerTypes, models.LayerSparseAttention); l >= 0 {
			name := fmt.Sprintf("blk.%d.indexer.k_proj.weight", l)
			ti, ok := f.Tensor(name)
			if !ok || len(ti.Dims) != 2 || ti.Dims[1]%uint64(a.Indexer.HeadDim) != 0 {
				return fmt.Errorf("gguf %s: no 2-D %s whose rows are whole %s = %d heads, to take the indexer's KV heads from (no key holds them)", f.Path, name, m.Key("attention.indexer.key_length"), a.Indexer.HeadDim)
			}
			a.Indexer.KVHeads = int(ti.Dims[1]) / a.Indexer.HeadDim
		}
		if len(a.PLE.LayerIDs) > 0 {
			np, err := ngramParams(m, a.PLE.NgramSize, a.PLE.HeadsPerNgram, a.VocabSize)
			if err != nil {
				return err
			}
			a.PLE.VocabSizeBase, a.PLE.VocabDivisibleBy, a.PLE.Seed = np.Base, np.DivisibleBy, np.Seed
			a.PLE.SplitParts = 512
		}
		return nil
	},
	names: func(c *models.Config, _ func(string) bool) Names {
		d := Qwen4ExpDimsOf(c)
		return Names{Role: func(role string) (gguf.RoleMap, error) { return Qwen4ExpRole(d, role) }}
	},
}

// ple marks a param only a model with a PLE layer has (its HF import too).
func ple(p Param) Param {
	has := func(a *models.Architecture) bool { return len(a.PLE.LayerIDs) > 0 }
	p.When = has
	if from := p.FromHF; from != nil {
		p.FromHF = func(a *models.Architecture, r *hfReader) {
			if has(a) {
				from(a, r)
			}
		}
	}
	return p
}

// qwen4LayerTypes maps the names HF versions used for Qwen3.8-Flash-Next
// layers onto ours: 5.17.0 rewrites full_attention to qwen_sparse_attention;
// older configs said deepseek_sparse_attention, and hybrid_indexed for the
// (linear-attention) PLE layer.
func qwen4LayerTypes(in []string) []string {
	out := make([]string, len(in))
	for i, t := range in {
		switch t {
		case models.LayerFullAttention, "deepseek_sparse_attention":
			out[i] = models.LayerSparseAttention
		case "hybrid_indexed":
			out[i] = models.LayerLinearAttention
		default:
			out[i] = t
		}
	}
	return out
}

// setCompressRatios takes the layer types from attention.compress_ratios:
// non-zero on the QSA layers, one ratio (the indexer's), and the layers
// full_attention_interval marks.
func setCompressRatios(a *models.Architecture, v Value, m Meta) error {
	key := m.Key("attention.compress_ratios")
	if len(v.Ints) != a.NumLayers {
		return fmt.Errorf("gguf %s: %s has %d entries, want one per block (%s = %d)", m.f.Path, key, len(v.Ints), m.Key(pBlockCount.Key), a.NumLayers)
	}
	interval, err := m.Int("full_attention_interval")
	if err != nil {
		return err
	}
	a.LayerTypes = make([]string, a.NumLayers)
	ratio := 0
	for i, r := range v.Ints {
		a.LayerTypes[i] = models.LayerLinearAttention
		if r == 0 {
			continue
		}
		a.LayerTypes[i] = models.LayerSparseAttention
		if ratio != 0 && int(r) != ratio {
			return fmt.Errorf("gguf %s: %s %v: the QSA layers' ratios differ (strata's indexer has one compress_ratio)", m.f.Path, key, v.Ints)
		}
		ratio = int(r)
		if interval > 0 && (i+1)%interval != 0 {
			return fmt.Errorf("gguf %s: %s marks layer %d as QSA, but %s = %d does not", m.f.Path, key, i, m.Key("full_attention_interval"), interval)
		}
	}
	a.Indexer.CompressRatio = ratio
	return nil
}

// Qwen4ExpDims are the sizes the qwen4exp name map needs, from a config.
func Qwen4ExpDimsOf(c *models.Config) Qwen4ExpDims {
	a := &c.Architecture
	la := a.LinearAttention
	d := Qwen4ExpDims{Layers: a.NumLayers, KeyHeads: la.NumKeyHeads, ValueHeads: la.NumValueHeads,
		KeyHeadDim: la.KeyHeadDim, ValueHeadDim: la.ValueHeadDim, IndexerHeads: a.Indexer.Heads, IndexerHeadDim: a.Indexer.HeadDim}
	for _, id := range a.PLE.LayerIDs {
		d.PLELayers = append(d.PLELayers, id-1)
	}
	return d
}

// ngramParams recovers the n-gram store's generating parameters, which no
// qwen4exp key holds, from what the file stores (HF 5.17.0's construction,
// models/ngram): ngram_vocab_size_base from the first head's prime (head j
// takes the (j+1)-th prime above base−1, so every base in (previous prime,
// P₀] builds the same table: HF's default 20,000,000 when it is one of them,
// else the roundest), make_ngram_vocab_size_divisible_by from the table's
// row count (HF's 128 when it gives that count, else the smallest power of
// two from 8 that does; any divisor giving that count builds the same table,
// only the artifact key sees which), and the seed by search (HF's 1234
// first, then 0 … 2²²) for the stored multipliers. Whatever is chosen, the
// table it builds must equal the stored primes, offsets and multipliers, or
// this is an error naming the field.
func ngramParams(m Meta, ngramSize, headsPerNgram, vocab int) (ngram.Params, error) {
	f := m.f
	var stored [3][]int64 // multipliers, head vocab sizes (primes), offsets
	keys := NgramKeys
	for i, k := range keys {
		v, err := f.Ints(k)
		if err != nil {
			return ngram.Params{}, err
		}
		stored[i] = v
	}
	multipliers, primes, offsets := stored[0], stored[1], stored[2]
	heads := (ngramSize - 1) * headsPerNgram
	if heads <= 0 || len(primes) != heads || len(offsets) != heads || len(multipliers) != ngramSize {
		return ngram.Params{}, fmt.Errorf("gguf %s: %s, %s, %s have %d, %d, %d entries; want %d heads and %d multipliers", f.Path,
			keys[1], keys[2], keys[0], len(primes), len(offsets), len(multipliers), heads, ngramSize)
	}
	tab, ok := f.Tensor(NameNgramTable)
	if !ok || len(tab.Dims) != 2 {
		return ngram.Params{}, fmt.Errorf("gguf %s: no 2-D %s (the PLE layer's n-gram table)", f.Path, NameNgramTable)
	}
	rows := int64(tab.Dims[1])
	np := ngram.Params{VocabSize: vocab, NgramSize: ngramSize, HeadsPerNgram: headsPerNgram}

	p0 := primes[0]
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
	for _, v := range primes {
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
		return np, fmt.Errorf("gguf %s: %s has %d rows, not the %d the stored %s add up to rounded to a power of two: no make_ngram_vocab_size_divisible_by fits (no key holds it)", f.Path, NameNgramTable, rows, sum, keys[1])
	}

	np.Seed = -1
	for s := -1; s < 1<<22; s++ {
		try := np
		try.Seed = max(s, 0)
		if s < 0 {
			try.Seed = 1234 // HF's default first
		}
		if try.VocabSize > 0 && slices.Equal(ngram.Multipliers(try), multipliers) {
			np.Seed = try.Seed
			break
		}
	}
	if np.Seed < 0 {
		return np, fmt.Errorf("gguf %s: %s %v match no seed in 0 … %d (the PLE seed has no key: pass a model config)", f.Path, keys[0], multipliers, 1<<22)
	}
	t, err := ngram.New(np)
	if err != nil {
		return np, fmt.Errorf("gguf %s: %w", f.Path, err)
	}
	if !slices.Equal(t.Primes, primes) || !slices.Equal(t.Offsets, offsets) {
		return np, fmt.Errorf("gguf %s: %s / %s are not HF's n-gram construction for ngram_vocab_size_base %d (no key holds it): pass a model config", f.Path, keys[1], keys[2], np.Base)
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

// The qwen4exp name map: how a GGUF file of architecture "qwen4exp" holds the
// roles of a qwen4_exp model (Qwen3.8-Flash-Next).
//
// Provenance. llama.cpp's converter (conversion/qwen4exp.py, PR #27742) could
// not be read here; the names, metadata keys and value rewrites below are
// those that several independent third-party readers of llama.cpp's qwen4exp
// files agree on (docs/decisions.md lists them). What none of them shows is
// marked as ours: the MTP names (llama.cpp exports no qwen4exp MTP head) and
// everything under "strata.".
//
// As in qwen3next, GGUF ne is the torch shape reversed, every zero-centred
// RMSNorm weight is stored as 1 + w (all norms but the GDN's gated ssm_norm)
// and ssm_a = −exp(A_log). New here:
//
//   - the GDN's value heads are in llama.cpp's tiled order: GGUF value head
//     r·nk + k is HF value head k·rep + r (rep = nv/nk), on every axis that
//     indexes value heads: the v rows of attn_qkv, attn_gate (z), ssm_beta,
//     ssm_alpha, the v channels of ssm_conv1d, ssm_a, ssm_dt.bias, and the
//     columns of ssm_out. Rows move as RowRuns; columns as ColRuns;
//   - the indexer's fused q|k projection is two tensors, indexer.q_proj and
//     indexer.k_proj;
//   - the n-gram table is one tensor, per_layer_token_embd.weight (one PLE
//     layer per file), and its hash parameters are int64 metadata arrays.

// NameNgramTable is the n-gram table of the (single) PLE layer.
const NameNgramTable = "per_layer_token_embd.weight"

var qwen4ExpGlobal = map[string]nameTr{
	"embed":      {"token_embd.weight", gguf.Same},
	"head":       {"output.weight", gguf.Same},
	"mixer.norm": {"output_hc_norm.weight", gguf.PlusOne},
	"mixer.down": {"output_hc_down.weight", gguf.Same},
	"mixer.up":   {"output_hc_up.weight", gguf.Same},
}

// qwen4ExpLayer maps the per-layer roles stored whole and in HF order; the
// name goes after "blk.{l}.".
var qwen4ExpLayer = withShared(map[string]nameTr{
	"attn_hc.norm":      {"hc_attn_norm.weight", gguf.PlusOne},
	"attn_hc.down":      {"hc_attn_down.weight", gguf.Same},
	"attn_hc.up":        {"hc_attn_up.weight", gguf.Same},
	"attn_hc.inject":    {"hc_attn_inject.weight", gguf.Same},
	"mlp_hc.norm":       {"hc_ffn_norm.weight", gguf.PlusOne},
	"mlp_hc.down":       {"hc_ffn_down.weight", gguf.Same},
	"mlp_hc.up":         {"hc_ffn_up.weight", gguf.Same},
	"mlp_hc.inject":     {"hc_ffn_inject.weight", gguf.Same},
	"gdn.norm":          {"ssm_norm.weight", gguf.Same}, // shared by all value heads: not reordered
	"attn.index_q_norm": {"indexer.q_norm.weight", gguf.PlusOne},
	"attn.index_k_norm": {"indexer.k_norm.weight", gguf.PlusOne},
	"ple.key":           {"ple_key.weight", gguf.Same},
	"ple.value":         {"ple_value.weight", gguf.Same},
	"ple.norm_key":      {"ple_norm_key.weight", gguf.PlusOne},
	"ple.norm_query":    {"ple_norm_query.weight", gguf.PlusOne},
	"ple.norm_conv":     {"ple_norm_conv.weight", gguf.PlusOne},
	"ple.conv":          {"ple_conv1d.weight", gguf.Same},
})

// qwen4ExpMTP are the MTP head's own tensors, on block num_layers (the
// decoder layer's tensors follow on the same block). Ours: llama.cpp has no
// qwen4exp MTP; the hc_head names are those of its MTP sidecar files, the fc
// pair is split where those files fuse an eh_proj of undocumented half order.
var qwen4ExpMTP = map[string]nameTr{
	"mtp.fc_embedding":          {"nextn.fc_embd.weight", gguf.Same},
	"mtp.fc_hidden":             {"nextn.fc_hidden.weight", gguf.Same},
	"mtp.pre_fc_norm_embedding": {"nextn.enorm.weight", gguf.PlusOne},
	"mtp.pre_fc_norm_hidden":    {"nextn.hnorm.weight", gguf.PlusOne},
	"mtp.mixer.norm":            {"nextn.hc_head_norm.weight", gguf.PlusOne},
	"mtp.mixer.down":            {"nextn.hc_head_down.weight", gguf.Same},
	"mtp.mixer.up":              {"nextn.hc_head_up.weight", gguf.Same},
}

// Qwen4ExpDims are the sizes the qwen4exp name map needs.
type Qwen4ExpDims struct {
	Layers                                         int // trunk layers; MTP layer i is block Layers+i
	KeyHeads, ValueHeads, KeyHeadDim, ValueHeadDim int // Gated DeltaNet
	IndexerHeads, IndexerHeadDim                   int
	PLELayers                                      []int // 0-based layers with an n-gram table
}

// Qwen4ExpRole maps one role (a models.TensorSpec name) to GGUF tensors.
func Qwen4ExpRole(d Qwen4ExpDims, role string) (gguf.RoleMap, error) {
	if g, ok := qwen4ExpGlobal[role]; ok {
		return gguf.RoleMap{Role: role, Tensor: g.name, Transform: g.tr}, nil
	}
	if m, ok := qwen4ExpMTP[role]; ok {
		return gguf.RoleMap{Role: role, Tensor: fmt.Sprintf("blk.%d.%s", d.Layers, m.name), Transform: m.tr}, nil
	}
	if rest, ok := strings.CutPrefix(role, "mtp."); ok {
		l, sub, ok := splitLayerRole(rest)
		if !ok {
			return gguf.RoleMap{}, fmt.Errorf("qwen4exp: no GGUF tensor for role %q", role)
		}
		m, err := qwen4ExpLayerRole(d, d.Layers+l, sub)
		if err != nil {
			return gguf.RoleMap{}, fmt.Errorf("qwen4exp: role %s: %w", role, err)
		}
		m.Role = role
		return m, nil
	}
	l, sub, ok := splitLayerRole(role)
	if !ok {
		return gguf.RoleMap{}, fmt.Errorf("qwen4exp: no GGUF tensor for role %q", role)
	}
	m, err := qwen4ExpLayerRole(d, l, sub)
	if err != nil {
		return gguf.RoleMap{}, fmt.Errorf("qwen4exp: role %s: %w", role, err)
	}
	m.Role = role
	return m, nil
}

// qwen4ExpLayerRole maps the role sub of block l.
func qwen4ExpLayerRole(d Qwen4ExpDims, l int, sub string) (gguf.RoleMap, error) {
	blk := "blk." + strconv.Itoa(l) + "."
	nk, nv, dk, dv := d.KeyHeads, d.ValueHeads, d.KeyHeadDim, d.ValueHeadDim
	gdn := strings.HasPrefix(sub, "gdn.") && sub != "gdn.norm"
	if gdn && (nk <= 0 || nv <= 0 || nv%nk != 0 || dk <= 0 || dv <= 0) {
		return gguf.RoleMap{}, fmt.Errorf("GDN dims %d key heads × %d, %d value heads × %d cannot be reordered", nk, dk, nv, dv)
	}
	rows := func(tensor string, base, w int) []gguf.RowRun {
		var runs []gguf.RowRun
		if base > 0 {
			runs = append(runs, rowRun(tensor, 0, 0, base))
		}
		for _, p := range tiled(nk, nv) {
			runs = append(runs, rowRun(tensor, base+p.gguf*w, base+p.hf*w, w))
		}
		return mergeRows(runs)
	}
	cols := func(w int) []gguf.ColRun {
		var runs []gguf.ColRun
		for _, p := range tiled(nk, nv) {
			runs = append(runs, colRun(p.gguf*w, p.hf*w, w))
		}
		return mergeCols(runs)
	}
	switch sub {
	case "gdn.qkv":
		return gguf.RoleMap{Runs: rows(blk+"attn_qkv.weight", 2*nk*dk, dv)}, nil
	case "gdn.z":
		return gguf.RoleMap{Runs: rows(blk+"attn_gate.weight", 0, dv)}, nil
	case "gdn.b":
		return gguf.RoleMap{Runs: rows(blk+"ssm_beta.weight", 0, 1)}, nil
	case "gdn.a":
		return gguf.RoleMap{Runs: rows(blk+"ssm_alpha.weight", 0, 1)}, nil
	case "gdn.conv":
		return gguf.RoleMap{Runs: rows(blk+"ssm_conv1d.weight", 2*nk*dk, dv)}, nil
	case "gdn.a_log":
		return gguf.RoleMap{Tensor: blk + "ssm_a", Cols: cols(1), Transform: gguf.NegExp}, nil
	case "gdn.dt_bias":
		return gguf.RoleMap{Tensor: blk + "ssm_dt.bias", Cols: cols(1)}, nil
	case "gdn.out":
		return gguf.RoleMap{Tensor: blk + "ssm_out.weight", Cols: cols(dv)}, nil
	case "attn.index_qk":
		q := d.IndexerHeads * d.IndexerHeadDim
		if q <= 0 || d.IndexerHeadDim <= 0 {
			return gguf.RoleMap{}, fmt.Errorf("indexer dims %d heads × %d cannot split index_qk", d.IndexerHeads, d.IndexerHeadDim)
		}
		return gguf.RoleMap{Runs: []gguf.RowRun{rowRun(blk+"indexer.q_proj.weight", 0, 0, q), rowRun(blk+"indexer.k_proj.weight", 0, q, d.IndexerHeadDim)}}, nil
	case "ple.table":
		if len(d.PLELayers) == 0 || d.PLELayers[0] != l {
			return gguf.RoleMap{}, fmt.Errorf("only the first PLE layer's n-gram table has a GGUF tensor (%s); PLE layers %v", NameNgramTable, d.PLELayers)
		}
		return gguf.RoleMap{Tensor: NameNgramTable}, nil
	}
	if m, ok := qwen4ExpLayer[sub]; ok {
		return gguf.RoleMap{Tensor: blk + m.name, Transform: m.tr}, nil
	}
	return gguf.RoleMap{}, errors.New("no GGUF tensor for it")
}

// headPair says that value head hf (HF's grouped order: key head k's heads
// are k·rep … k·rep+rep−1) sits at position gguf in llama.cpp's tiled order
// (r·nk + k), the order ggml's broadcast of the key heads needs.
type headPair struct{ hf, gguf int }

func tiled(nk, nv int) []headPair {
	rep := nv / nk
	out := make([]headPair, 0, nv)
	for h := 0; h < nv; h++ {
		k, r := h/rep, h%rep
		out = append(out, headPair{h, r*nk + k})
	}
	return out
}

// mergeRows joins runs that continue each other in both the tensor and the
// role (whole blocks when rep = 1), keeping role order.
func mergeRows(runs []gguf.RowRun) []gguf.RowRun {
	var out []gguf.RowRun
	for _, r := range runs {
		if n := len(out); n > 0 && out[n-1].Tensor == r.Tensor && out[n-1].TensorRow+out[n-1].Rows == r.TensorRow && out[n-1].RoleRow+out[n-1].Rows == r.RoleRow {
			out[n-1].Rows += r.Rows
			continue
		}
		out = append(out, r)
	}
	return out
}

func mergeCols(runs []gguf.ColRun) []gguf.ColRun {
	slices.SortFunc(runs, func(a, b gguf.ColRun) int { return a.RoleCol - b.RoleCol })
	var out []gguf.ColRun
	for _, c := range runs {
		if n := len(out); n > 0 && out[n-1].TensorCol+out[n-1].Cols == c.TensorCol && out[n-1].RoleCol+out[n-1].Cols == c.RoleCol {
			out[n-1].Cols += c.Cols
			continue
		}
		out = append(out, c)
	}
	if len(out) == 1 && out[0].TensorCol == 0 {
		return nil // the identity
	}
	return out
}
