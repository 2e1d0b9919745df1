// Package models describes a model completely: its architecture (every HF config
// field that changes the math), the quant plan per tensor class, the window shapes
// the generator emits, and runtime defaults. A Config is read from a model.toml,
// validated with errors that name the field, or imported from an HF config.json.
package models

import (
	"github.com/strata-llm/strata/models/ngram"
	"github.com/strata-llm/strata/models/quant"
)

// Layer kinds, as HF spells them in config.json `layer_types`.
const (
	LayerLinearAttention = "linear_attention"      // Gated DeltaNet
	LayerFullAttention   = "full_attention"        // gated softmax attention (qwen3_next)
	LayerSparseAttention = "qwen_sparse_attention" // gated attention over indexer-selected blocks (qwen4_exp)
)

// Model types we implement.
const (
	TypeQwen3Next = "qwen3_next"
	TypeQwen4Exp  = "qwen4_exp" // Qwen3.8-Flash-Next
)

// Config is the whole description of one model. Every field is required in a
// model.toml unless its comment says otherwise.
type Config struct {
	Name         string       `toml:"name"`
	Architecture Architecture `toml:"architecture"`
	Quant        QuantPlan    `toml:"quant"`
	Windows      Windows      `toml:"windows"`
	Runtime      Runtime      `toml:"runtime"`
}

// Architecture holds the fields of the HF config that affect the math.
type Architecture struct {
	ModelType         string   `toml:"model_type"`
	HiddenSize        int      `toml:"hidden_size"`
	NumLayers         int      `toml:"num_layers"`
	LayerTypes        []string `toml:"layer_types"`
	VocabSize         int      `toml:"vocab_size"`
	RMSNormEps        float64  `toml:"rms_norm_eps"`
	HiddenAct         string   `toml:"hidden_act"`
	TieWordEmbeddings bool     `toml:"tie_word_embeddings"`
	EOSTokenIDs       []int    `toml:"eos_token_ids"` // optional; the first one resets n-gram context

	Attention        Attention        `toml:"attention"`
	LinearAttention  LinearAttention  `toml:"linear_attention"`
	MoE              MoE              `toml:"moe"`
	MTP              MTP              `toml:"mtp"`
	HyperConnections HyperConnections `toml:"hyper_connections"` // optional table: qwen4_exp
	Indexer          Indexer          `toml:"indexer"`           // optional table: qwen4_exp
	PLE              PLE              `toml:"ple"`               // optional table: qwen4_exp
}

// HyperConnections describes the multi-stream residual of qwen4_exp: the
// residual is Count streams of hidden_size, read and written through gated
// residual blocks with a low-rank gate.
type HyperConnections struct {
	Count   int `toml:"count"`
	LowRank int `toml:"lowrank"`
}

// Indexer describes the QSA block selector of the sparse-attention layers.
type Indexer struct {
	Heads         int `toml:"heads"`
	KVHeads       int `toml:"kv_heads"`
	HeadDim       int `toml:"head_dim"`
	Budget        int `toml:"budget"`         // tokens attended beyond the forced tail
	CompressRatio int `toml:"compress_ratio"` // tokens per pooled block
}

// BlockTopK is how many pooled blocks a query keeps.
func (x Indexer) BlockTopK() int {
	if x.CompressRatio == 0 {
		return 0
	}
	return x.Budget / x.CompressRatio
}

// PLE describes the hashed n-gram store and the PLE layers that read it.
type PLE struct {
	LayerIDs         []int `toml:"layer_ids"` // 1-based, as HF's ple_layer_ids
	EmbedDim         int   `toml:"embed_dim"`
	ConvKernel       int   `toml:"conv_kernel"`
	NgramSize        int   `toml:"ngram_size"`
	HeadsPerNgram    int   `toml:"heads_per_ngram"`
	VocabSizeBase    int   `toml:"ngram_vocab_size_base"`
	VocabDivisibleBy int   `toml:"vocab_size_divisible_by"`
	Seed             int   `toml:"seed"`
	SplitParts       int   `toml:"split_parts"` // shards of the table in the checkpoint
}

// NgramHeads is the number of hashed heads: heads_per_ngram per order 2…ngram_size.
func (p PLE) NgramHeads() int { return (p.NgramSize - 1) * p.HeadsPerNgram }

// RowWidth is the width of one table row (one head's slice of the embedding).
func (p PLE) RowWidth() int {
	if p.NgramHeads() == 0 {
		return 0
	}
	return p.EmbedDim / p.NgramHeads()
}

// NgramParams are the n-gram store parameters of PLE ordinal ℓ.
func (a Architecture) NgramParams(ordinal int) ngram.Params {
	p := a.PLE
	return ngram.Params{VocabSize: a.VocabSize, NgramSize: p.NgramSize, HeadsPerNgram: p.HeadsPerNgram,
		Base: p.VocabSizeBase, DivisibleBy: p.VocabDivisibleBy, Seed: p.Seed, Ordinal: ordinal}
}

// Ordinal returns the PLE ordinal ℓ of 0-based layer i, or -1 if the layer has
// no PLE.
func (p PLE) Ordinal(i int) int {
	for k, id := range p.LayerIDs {
		if id == i+1 {
			return k
		}
	}
	return -1
}

// Attention describes the full-attention (gated, partial-RoPE, GQA) layers.
type Attention struct {
	NumHeads            int     `toml:"num_heads"`
	NumKVHeads          int     `toml:"num_kv_heads"`
	HeadDim             int     `toml:"head_dim"`
	RopeTheta           float64 `toml:"rope_theta"`
	PartialRotaryFactor float64 `toml:"partial_rotary_factor"`
	OutputGate          bool    `toml:"output_gate"` // q_proj carries a sigmoid gate half per head
	MaxPositions        int     `toml:"max_position_embeddings"`
}

// RotaryDim is the number of leading dims of each head that RoPE rotates.
func (a Attention) RotaryDim() int { return int(float64(a.HeadDim) * a.PartialRotaryFactor) }

// LinearAttention describes the Gated DeltaNet layers.
type LinearAttention struct {
	NumKeyHeads   int    `toml:"num_key_heads"`
	NumValueHeads int    `toml:"num_value_heads"`
	KeyHeadDim    int    `toml:"key_head_dim"`
	ValueHeadDim  int    `toml:"value_head_dim"`
	ConvKernel    int    `toml:"conv_kernel"`
	GateAct       string `toml:"gate_act"` // the gated norm's activation: "silu" (qwen3_next) or "sigmoid"
	// SplitProjections (qwen3_next) runs the GDN input projections as four
	// matrices, q|k|v (flat), z, b and a, instead of HF's two grouped ones
	// (in_proj_qkvz, in_proj_ba): the layout llama.cpp's qwen3next files
	// store attn_qkv and attn_gate in, so they are used in place and may
	// differ in format. Set by the GGUF loader; not written to model.toml.
	SplitProjections bool `toml:"-"`
}

// GroupedGDN reports whether the GDN input projections are Qwen3-Next's
// grouped qkvz and ba (per key head: q, k, then v and z of its value heads).
func (a *Architecture) GroupedGDN() bool {
	return a.ModelType == TypeQwen3Next && !a.LinearAttention.SplitProjections
}

// KeyDim is the width of q (and of k) summed over key heads.
func (l LinearAttention) KeyDim() int { return l.NumKeyHeads * l.KeyHeadDim }

// ValueDim is the width of v (and of z) summed over value heads.
func (l LinearAttention) ValueDim() int { return l.NumValueHeads * l.ValueHeadDim }

// ConvDim is the number of channels of the causal conv: q, k and v.
func (l LinearAttention) ConvDim() int { return 2*l.KeyDim() + l.ValueDim() }

// MoE describes the sparse MLP of every layer.
type MoE struct {
	NumExperts                   int   `toml:"num_experts"`
	ExpertsPerToken              int   `toml:"experts_per_token"`
	IntermediateSize             int   `toml:"moe_intermediate_size"`
	SharedExpertIntermediateSize int   `toml:"shared_expert_intermediate_size"`
	NormTopKProb                 bool  `toml:"norm_topk_prob"`
	DecoderSparseStep            int   `toml:"decoder_sparse_step"`
	MLPOnlyLayers                []int `toml:"mlp_only_layers"`
	DenseIntermediateSize        int   `toml:"dense_intermediate_size"` // HF intermediate_size; used only by mlp_only layers
}

// MTP describes the multi-token-prediction head (0 layers: none).
type MTP struct {
	NumLayers int `toml:"num_layers"`
}

// Tensor classes of the quant plan.
const (
	ClassTrunk      = "trunk"
	ClassExperts    = "experts"
	ClassEmbeddings = "embeddings"
	ClassHead       = "head"
	// ClassRouter is the MoE router (llama.cpp's ffn_gate_inp): its mixes
	// keep it in f16 whatever the trunk's format, since the expert choice is
	// sensitive to it. An empty quant.router means the trunk's format.
	ClassRouter = "router"
)

// QuantPlan gives the storage format per tensor class. Norms, gates and other
// small vectors always stay f32 whatever the plan says.
type QuantPlan struct {
	Trunk      string `toml:"trunk"`
	Experts    string `toml:"experts"`
	Embeddings string `toml:"embeddings"`
	Head       string `toml:"head"`
	Router     string `toml:"router"` // optional: "" is the trunk's format
	// Tensors, when set, is the format of each named role, overriding the
	// classes: a GGUF's own tensor types (weights.GGUF.FileFormats), so a
	// llama.cpp mix runs as it is. Never written to a model.toml. A role
	// whose rows are not whole blocks of its format is stored zero-padded.
	// (A pointer, so a plan stays comparable.)
	Tensors *TensorFormats `toml:"-"`
	// Rows is the policy for rows that are not whole blocks of their format
	// (quant.ParseRowPolicy: "fallback", "pad", "smallest"); optional, empty
	// means "fallback", llama.cpp's. "pad" (and "smallest") write such rows
	// zero-padded, a file only strata reads, when a plan asks for it
	// (strata convert warns).
	Rows string `toml:"rows"`
}

// TensorFormats maps role names to storage formats.
type TensorFormats struct{ ByName map[string]string }

// Of returns the format of role name, if it has one.
func (t *TensorFormats) Of(name string) (string, bool) {
	if t == nil {
		return "", false
	}
	f, ok := t.ByName[name]
	return f, ok
}

// RowPolicy returns the plan's policy for rows that are not whole blocks.
func (q QuantPlan) RowPolicy() (quant.RowPolicy, error) {
	if q.Rows == "" {
		return quant.Fallback, nil
	}
	return quant.ParseRowPolicy(q.Rows)
}

// ForClass returns the format planned for a tensor class.
func (q QuantPlan) ForClass(class string) string {
	switch class {
	case ClassExperts:
		return q.Experts
	case ClassEmbeddings:
		return q.Embeddings
	case ClassHead:
		return q.Head
	case ClassRouter:
		if q.Router != "" {
			return q.Router
		}
		return q.Trunk
	default:
		return q.Trunk
	}
}

// Windows lists the window shapes the generator emits: one-token decode up to
// MaxDecodeRows (1 + drafts) and prefill chunks of PrefillRows.
type Windows struct {
	MaxDecodeRows int `toml:"max_decode_rows"`
	PrefillRows   int `toml:"prefill_rows"`
}

// Shapes returns every window row count to generate, ascending, without repeats.
func (w Windows) Shapes() []int {
	var out []int
	for t := 1; t <= w.MaxDecodeRows; t++ {
		out = append(out, t)
	}
	if w.PrefillRows > w.MaxDecodeRows {
		out = append(out, w.PrefillRows)
	}
	return out
}

// Runtime holds defaults the runtime starts from; flags override them.
type Runtime struct {
	ContextLength int `toml:"context_length"` // KV cache rows per attention layer
	Threads       int `toml:"threads"`        // 0: one per core
	// MoCE (cache-aware routing; off by default, since it changes which
	// experts run): from rank moce_protect on, a routed expert that is not
	// resident has its probability scaled by moce_lambda, so a resident one
	// inside the true top moce_max_rank may take its place.
	MoCE        bool    `toml:"moce"`
	MoCELambda  float64 `toml:"moce_lambda"`
	MoCEProtect int     `toml:"moce_protect"`
	MoCEMaxRank int     `toml:"moce_max_rank"` // 0: uncapped
	// ReadAhead predicts layer l+1's experts (its router applied to layer
	// l's MoE input) so the streamer reads them ahead.
	ReadAhead bool `toml:"read_ahead"`
}

// MoCEDefaults fills the MoCE knobs a config leaves at zero: λ 0.85, 3
// protected ranks, the top 16 as the cap (colibri's and strata's measured
// settings).
func (r *Runtime) MoCEDefaults() {
	if r.MoCELambda == 0 {
		r.MoCELambda = 0.85
	}
	if r.MoCEProtect == 0 {
		r.MoCEProtect = 3
	}
	if r.MoCEMaxRank == 0 {
		r.MoCEMaxRank = 16
	}
}

// IsSparseLayer reports whether layer i uses the MoE block (HF's rule).
func (a Architecture) IsSparseLayer(i int) bool {
	for _, l := range a.MoE.MLPOnlyLayers {
		if l == i {
			return false
		}
	}
	return a.MoE.NumExperts > 0 && a.MoE.DecoderSparseStep > 0 && (i+1)%a.MoE.DecoderSparseStep == 0
}
