// Package models describes a model completely: its architecture (every HF config
// field that changes the math), the quant plan per tensor class, the window shapes
// the generator emits, and runtime defaults. A Config is read from a model.toml,
// validated with errors that name the field, or imported from an HF config.json.
package models

// Layer kinds, as HF spells them in config.json `layer_types`.
const (
	LayerLinearAttention = "linear_attention" // Gated DeltaNet
	LayerFullAttention   = "full_attention"   // gated softmax attention
)

// Model types we implement.
const (
	TypeQwen3Next = "qwen3_next"
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

	Attention       Attention       `toml:"attention"`
	LinearAttention LinearAttention `toml:"linear_attention"`
	MoE             MoE             `toml:"moe"`
	MTP             MTP             `toml:"mtp"`
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
	NumKeyHeads   int `toml:"num_key_heads"`
	NumValueHeads int `toml:"num_value_heads"`
	KeyHeadDim    int `toml:"key_head_dim"`
	ValueHeadDim  int `toml:"value_head_dim"`
	ConvKernel    int `toml:"conv_kernel"`
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
)

// QuantPlan gives the storage format per tensor class. Norms, gates and other
// small vectors always stay f32 whatever the plan says.
type QuantPlan struct {
	Trunk      string `toml:"trunk"`
	Experts    string `toml:"experts"`
	Embeddings string `toml:"embeddings"`
	Head       string `toml:"head"`
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
