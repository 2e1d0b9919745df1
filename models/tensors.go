package models

import (
	"fmt"

	"github.com/strata-llm/strata/models/ngram"
	"github.com/strata-llm/strata/models/quant"
)

// ClassNgram is the hashed n-gram table of the PLE layers. It is gathered row
// by row on the host from the checkpoint, never placed in a device buffer.
const ClassNgram = "ngram"

// TensorSpec is one weight tensor as the engine sees it: our role name, its
// shape (outermost first, as torch writes it) and its quant-plan class. The
// generator lays these out in buffers; the weight loaders fill them.
type TensorSpec struct {
	Name  string
	Shape []int
	Class string
	// Small tensors (norm weights, gates, conv taps, decay parameters) stay f32
	// whatever the plan says: they are tiny and sit on precision-critical paths.
	Small bool
}

// Host reports whether the tensor stays on the host (the n-gram table).
func (t TensorSpec) Host() bool { return t.Class == ClassNgram }

// Elements is the product of the shape.
func (t TensorSpec) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Format is the storage format of the tensor under a quant plan.
func (t TensorSpec) Format(q QuantPlan) string {
	if t.Small {
		return "f32"
	}
	if f, ok := q.Tensors.Of(t.Name); ok {
		return f
	}
	return q.ForClass(t.Class)
}

// Layout is how the tensor's rows (its last dimension) are stored under a
// quant plan: the planned format, or its fallback, with the plan's row policy
// deciding rows that are not whole blocks (quant.ForRow). The generator, the
// weight loaders and the converters all take a tensor's layout from here, so
// they agree byte for byte.
func (t TensorSpec) Layout(q QuantPlan) (quant.RowLayout, error) {
	p, err := q.RowPolicy()
	if err != nil {
		return quant.RowLayout{}, fmt.Errorf("tensor %s: quant.rows: %w", t.Name, err)
	}
	if len(t.Shape) == 0 {
		return quant.RowLayout{}, fmt.Errorf("tensor %s has no shape", t.Name)
	}
	if _, ok := q.Tensors.Of(t.Name); ok && !t.Small {
		p = quant.Pad // the format the file holds, as it holds it
	}
	l, err := quant.ForRow(t.Format(q), t.Shape[len(t.Shape)-1], p)
	if err != nil {
		return quant.RowLayout{}, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return l, nil
}

// Rows is the number of rows of the tensor: every dimension but the last.
func (t TensorSpec) Rows() int {
	if len(t.Shape) == 0 {
		return 0
	}
	return t.Elements() / max(t.Shape[len(t.Shape)-1], 1)
}

// LayerTensor names a per-layer role, e.g. LayerTensor(3, "attn.q").
func LayerTensor(layer int, role string) string { return fmt.Sprintf("layers.%d.%s", layer, role) }

// MTPLayerPrefix prefixes the roles of MTP decoder layer i.
func MTPLayerPrefix(i int) string { return fmt.Sprintf("mtp.layers.%d.", i) }

// tensorList collects specs in order.
type tensorList struct {
	c   *Config
	out []TensorSpec
}

func (l *tensorList) add(name, class string, small bool, shape ...int) {
	l.out = append(l.out, TensorSpec{Name: name, Shape: shape, Class: class, Small: small})
}

// Tensors lists every weight tensor of the model in a fixed order: embeddings,
// then each layer (mixer, then MLP), then the final norm (or mixer) and the
// head, then the MTP head. Routed experts appear as stacked [E, ...] tensors.
func (c *Config) Tensors() []TensorSpec {
	a := &c.Architecture
	l := &tensorList{c: c}
	l.add("embed", ClassEmbeddings, false, a.VocabSize, a.HiddenSize)
	for i := 0; i < a.NumLayers; i++ {
		l.layer(fmt.Sprintf("layers.%d.", i), a.LayerTypes[i], a.PLE.Ordinal(i))
	}
	if a.HyperConnections.Count > 0 {
		l.hyperConnection("mixer.", false)
	} else {
		l.add("final_norm", ClassTrunk, true, a.HiddenSize)
	}
	l.add("head", ClassHead, false, a.VocabSize, a.HiddenSize)
	l.mtp()
	return l.out
}

// layer adds one decoder layer's roles under prefix.
func (l *tensorList) layer(p, kind string, ple int) {
	a := &l.c.Architecture
	H := a.HiddenSize
	qwen4 := a.ModelType == TypeQwen4Exp
	if ple >= 0 {
		l.ple(p, ple)
	}
	if qwen4 {
		l.hyperConnection(p+"attn_hc.", true)
	} else {
		l.add(p+"attn_norm", ClassTrunk, true, H)
	}
	switch kind {
	case LayerLinearAttention:
		g := a.LinearAttention
		if !a.GroupedGDN() { // Qwen3.5-style separate projections (and llama.cpp's qwen3next)
			l.add(p+"gdn.qkv", ClassTrunk, false, g.ConvDim(), H)
			l.add(p+"gdn.z", ClassTrunk, false, g.ValueDim(), H)
			l.add(p+"gdn.b", ClassTrunk, false, g.NumValueHeads, H)
			l.add(p+"gdn.a", ClassTrunk, false, g.NumValueHeads, H)
		} else { // Qwen3-Next's grouped projections
			l.add(p+"gdn.qkvz", ClassTrunk, false, 2*g.KeyDim()+2*g.ValueDim(), H)
			l.add(p+"gdn.ba", ClassTrunk, false, 2*g.NumValueHeads, H)
		}
		l.add(p+"gdn.conv", ClassTrunk, true, g.ConvDim(), g.ConvKernel)
		l.add(p+"gdn.a_log", ClassTrunk, true, g.NumValueHeads)
		l.add(p+"gdn.dt_bias", ClassTrunk, true, g.NumValueHeads)
		l.add(p+"gdn.norm", ClassTrunk, true, g.ValueHeadDim)
		l.add(p+"gdn.out", ClassTrunk, false, H, g.ValueDim())
	default: // full or sparse attention
		at := a.Attention
		qRows := at.NumHeads * at.HeadDim
		if at.OutputGate {
			qRows *= 2
		}
		l.add(p+"attn.q", ClassTrunk, false, qRows, H)
		l.add(p+"attn.k", ClassTrunk, false, at.NumKVHeads*at.HeadDim, H)
		l.add(p+"attn.v", ClassTrunk, false, at.NumKVHeads*at.HeadDim, H)
		l.add(p+"attn.o", ClassTrunk, false, H, at.NumHeads*at.HeadDim)
		l.add(p+"attn.q_norm", ClassTrunk, true, at.HeadDim)
		l.add(p+"attn.k_norm", ClassTrunk, true, at.HeadDim)
		if kind == LayerSparseAttention {
			ix := a.Indexer
			l.add(p+"attn.index_qk", ClassTrunk, false, (ix.Heads+ix.KVHeads)*ix.HeadDim, H)
			l.add(p+"attn.index_q_norm", ClassTrunk, true, ix.HeadDim)
			l.add(p+"attn.index_k_norm", ClassTrunk, true, ix.HeadDim)
		}
	}
	if qwen4 {
		l.hyperConnection(p+"mlp_hc.", true)
	} else {
		l.add(p+"ffn_norm", ClassTrunk, true, H)
	}
	m := a.MoE
	l.add(p+"moe.router", ClassRouter, false, m.NumExperts, H)
	l.add(p+"moe.experts.gate", ClassExperts, false, m.NumExperts, m.IntermediateSize, H)
	l.add(p+"moe.experts.up", ClassExperts, false, m.NumExperts, m.IntermediateSize, H)
	l.add(p+"moe.experts.down", ClassExperts, false, m.NumExperts, H, m.IntermediateSize)
	if m.SharedExpertIntermediateSize > 0 {
		l.add(p+"moe.shared.gate", ClassTrunk, false, m.SharedExpertIntermediateSize, H)
		l.add(p+"moe.shared.up", ClassTrunk, false, m.SharedExpertIntermediateSize, H)
		l.add(p+"moe.shared.down", ClassTrunk, false, H, m.SharedExpertIntermediateSize)
		l.add(p+"moe.shared_gate", ClassTrunk, true, 1, H)
	}
}

// hyperConnection adds a gated-residual block: the per-stream norm, the
// low-rank gate, and (except for the final mixer) the inject weights.
func (l *tensorList) hyperConnection(p string, inject bool) {
	a := &l.c.Architecture
	S := a.HyperConnections.Count * a.HiddenSize
	R := a.HyperConnections.LowRank
	l.add(p+"norm", ClassTrunk, true, S)
	l.add(p+"down", ClassTrunk, false, R, S)
	l.add(p+"up", ClassTrunk, false, S, R)
	if inject {
		l.add(p+"inject", ClassTrunk, true, a.HyperConnections.Count, S)
	}
}

// ple adds a PLE layer's projections, norms, conv and its n-gram table.
func (l *tensorList) ple(p string, ordinal int) {
	a := &l.c.Architecture
	S := a.HyperConnections.Count * a.HiddenSize
	E := a.PLE.EmbedDim
	l.add(p+"ple.key", ClassTrunk, false, S, E)
	l.add(p+"ple.value", ClassTrunk, false, a.HiddenSize, E)
	l.add(p+"ple.norm_key", ClassTrunk, true, S)
	l.add(p+"ple.norm_query", ClassTrunk, true, S)
	l.add(p+"ple.norm_conv", ClassTrunk, true, S)
	l.add(p+"ple.conv", ClassTrunk, true, S, a.PLE.ConvKernel)
	rows := 0
	if t, err := ngram.New(a.NgramParams(ordinal)); err == nil { // Validate reports bad parameters
		rows = int(t.Rows)
	}
	l.add(p+"ple.table", ClassNgram, false, rows, a.PLE.RowWidth())
}

// mtp adds the multi-token-prediction head: its input projections and norms,
// one attention decoder layer per MTP layer, and (qwen4_exp) its mixer. The
// embedding and head are shared with the trunk.
func (l *tensorList) mtp() {
	a := &l.c.Architecture
	if a.MTP.NumLayers == 0 {
		return
	}
	H := a.HiddenSize
	if a.ModelType == TypeQwen4Exp {
		l.add("mtp.fc_embedding", ClassTrunk, false, H, H)
		l.add("mtp.fc_hidden", ClassTrunk, false, H, H)
		l.add("mtp.pre_fc_norm_embedding", ClassTrunk, true, H)
		l.add("mtp.pre_fc_norm_hidden", ClassTrunk, true, a.HyperConnections.Count*H)
		for i := 0; i < a.MTP.NumLayers; i++ {
			l.layer(MTPLayerPrefix(i), LayerSparseAttention, -1)
		}
		l.hyperConnection("mtp.mixer.", false)
		return
	}
	l.add("mtp.fc", ClassTrunk, false, H, 2*H)
	l.add("mtp.pre_fc_norm_embedding", ClassTrunk, true, H)
	l.add("mtp.pre_fc_norm_hidden", ClassTrunk, true, H)
	for i := 0; i < a.MTP.NumLayers; i++ {
		l.layer(MTPLayerPrefix(i), LayerFullAttention, -1)
	}
	l.add("mtp.norm", ClassTrunk, true, H)
}
