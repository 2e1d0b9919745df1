package models

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/strata-llm/strata/models/quant"
)

// Validate checks that c describes a model this engine implements. It
// reports every problem, joined, each a *FieldError naming its model.toml
// field and what was expected.
func (c *Config) Validate() error {
	v := &validator{}
	v.name(c.Name)
	v.architecture(&c.Architecture)
	v.quant(&c.Quant)
	v.atLeast("windows.max_decode_rows", c.Windows.MaxDecodeRows, 1)
	v.atLeast("windows.prefill_rows", c.Windows.PrefillRows, 1)
	v.atLeast("runtime.context_length", c.Runtime.ContextLength, 1)
	v.atLeast("runtime.threads", c.Runtime.Threads, 0)
	if r := c.Runtime; r.MoCE {
		if !(r.MoCELambda > 0 && r.MoCELambda <= 1) {
			v.add("runtime.moce_lambda", "is %v (expected a factor in (0, 1] applied to non-resident experts)", r.MoCELambda)
		}
		if r.MoCEProtect < 0 || r.MoCEProtect > c.Architecture.MoE.ExpertsPerToken {
			v.add("runtime.moce_protect", "is %d (expected 0 … architecture.moe.experts_per_token = %d)", r.MoCEProtect, c.Architecture.MoE.ExpertsPerToken)
		}
		if r.MoCEMaxRank != 0 && r.MoCEMaxRank < c.Architecture.MoE.ExpertsPerToken {
			v.add("runtime.moce_max_rank", "is %d (expected 0 (uncapped) or ≥ architecture.moe.experts_per_token = %d)", r.MoCEMaxRank, c.Architecture.MoE.ExpertsPerToken)
		}
	}
	return errors.Join(v.errs...)
}

type validator struct{ errs []error }

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, fieldErr(field, format, args...))
}

func (v *validator) atLeast(field string, got, lo int) {
	if got < lo {
		want := fmt.Sprintf("an integer ≥ %d", lo)
		if lo == 1 {
			want = "a positive integer"
		}
		v.add(field, "is %d (expected %s)", got, want)
	}
}

func (v *validator) positive(field string, got int) { v.atLeast(field, got, 1) }

func (v *validator) positiveFloat(field string, got float64) {
	if !(got > 0) || math.IsInf(got, 0) {
		v.add(field, "is %v (expected a positive finite number)", got)
	}
}

// name must be usable as a folder name under models/ and generated/.
func (v *validator) name(name string) {
	if name == "" {
		v.add("name", "is empty (expected the model folder name, e.g. \"tiny-a\")")
		return
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' ||
			r == '_' || (i > 0 && (r == '-' || r == '.'))
		if !ok {
			v.add("name", "is %q (expected letters, digits, '_', '-' or '.', not starting with '-' or '.'; it names folders)", name)
			return
		}
	}
}

func (v *validator) architecture(a *Architecture) {
	attentionType := LayerFullAttention
	switch a.ModelType {
	case TypeQwen3Next:
		if a.LinearAttention.GateAct != "silu" {
			v.add("architecture.linear_attention.gate_act", "is %q (expected \"silu\": qwen3_next's gated norm always uses SiLU)", a.LinearAttention.GateAct)
		}
		for _, f := range []struct {
			path string
			zero bool
		}{
			{"architecture.hyper_connections", a.HyperConnections == HyperConnections{}},
			{"architecture.indexer", a.Indexer == Indexer{}},
			{"architecture.ple", len(a.PLE.LayerIDs) == 0 && a.PLE.EmbedDim == 0},
		} {
			if !f.zero {
				v.add(f.path, "is set (expected no [%s] table: qwen3_next has no such feature)", f.path)
			}
		}
	case TypeQwen4Exp:
		attentionType = LayerSparseAttention
		v.qwen4Exp(a)
	default:
		v.add("architecture.model_type", "is %q (expected %q or %q, the implemented model types)", a.ModelType, TypeQwen3Next, TypeQwen4Exp)
	}
	v.positive("architecture.hidden_size", a.HiddenSize)
	v.positive("architecture.num_layers", a.NumLayers)
	v.positive("architecture.vocab_size", a.VocabSize)
	v.positiveFloat("architecture.rms_norm_eps", a.RMSNormEps)
	if a.HiddenAct != "silu" {
		v.add("architecture.hidden_act", "is %q (expected \"silu\", the only implemented activation)", a.HiddenAct)
	}
	if len(a.LayerTypes) != a.NumLayers {
		v.add("architecture.layer_types", "has %d entries (expected one per layer: architecture.num_layers = %d)", len(a.LayerTypes), a.NumLayers)
	}
	for i, t := range a.LayerTypes {
		if t != LayerLinearAttention && t != attentionType {
			v.add(fmt.Sprintf("architecture.layer_types[%d]", i), "is %q (expected %q or %q for %s)", t, LayerLinearAttention, attentionType, a.ModelType)
		}
	}

	at := &a.Attention
	v.positive("architecture.attention.num_heads", at.NumHeads)
	v.positive("architecture.attention.num_kv_heads", at.NumKVHeads)
	v.positive("architecture.attention.head_dim", at.HeadDim)
	v.positive("architecture.attention.max_position_embeddings", at.MaxPositions)
	v.positiveFloat("architecture.attention.rope_theta", at.RopeTheta)
	if at.NumHeads > 0 && at.NumKVHeads > 0 && at.NumHeads%at.NumKVHeads != 0 {
		v.add("architecture.attention.num_heads", "is %d (expected a multiple of architecture.attention.num_kv_heads = %d)", at.NumHeads, at.NumKVHeads)
	}
	if f := at.PartialRotaryFactor; !(f > 0 && f <= 1) {
		v.add("architecture.attention.partial_rotary_factor", "is %v (expected a number in (0, 1])", f)
	} else if rd := at.RotaryDim(); at.HeadDim > 0 && (rd < 2 || rd%2 != 0) {
		v.add("architecture.attention.partial_rotary_factor", "gives rotary dim %d = int(head_dim %d × %v) (expected an even number ≥ 2, since RoPE rotates pairs)", rd, at.HeadDim, f)
	}

	la := &a.LinearAttention
	v.positive("architecture.linear_attention.num_key_heads", la.NumKeyHeads)
	v.positive("architecture.linear_attention.num_value_heads", la.NumValueHeads)
	v.positive("architecture.linear_attention.key_head_dim", la.KeyHeadDim)
	v.positive("architecture.linear_attention.value_head_dim", la.ValueHeadDim)
	v.positive("architecture.linear_attention.conv_kernel", la.ConvKernel)
	if la.NumKeyHeads > 0 && la.NumValueHeads > 0 && la.NumValueHeads%la.NumKeyHeads != 0 {
		v.add("architecture.linear_attention.num_value_heads", "is %d (expected a multiple of architecture.linear_attention.num_key_heads = %d)", la.NumValueHeads, la.NumKeyHeads)
	}

	m := &a.MoE
	v.positive("architecture.moe.num_experts", m.NumExperts)
	v.positive("architecture.moe.moe_intermediate_size", m.IntermediateSize)
	v.positive("architecture.moe.shared_expert_intermediate_size", m.SharedExpertIntermediateSize)
	v.atLeast("architecture.moe.dense_intermediate_size", m.DenseIntermediateSize, 0)
	if m.ExpertsPerToken < 1 || m.ExpertsPerToken > max(m.NumExperts, 1) {
		v.add("architecture.moe.experts_per_token", "is %d (expected 1 … architecture.moe.num_experts = %d)", m.ExpertsPerToken, m.NumExperts)
	}
	// Every layer must be MoE until the dense-MLP path exists.
	if m.DecoderSparseStep != 1 {
		v.add("architecture.moe.decoder_sparse_step", "is %d (expected 1: dense MLP layers are not supported yet)", m.DecoderSparseStep)
	}
	if len(m.MLPOnlyLayers) > 0 {
		v.add("architecture.moe.mlp_only_layers", "is %v (expected []: dense MLP layers are not supported yet)", m.MLPOnlyLayers)
	}

	v.atLeast("architecture.mtp.num_layers", a.MTP.NumLayers, 0)
}

// qwen4Exp checks the features only Qwen3.8-Flash-Next has, with HF 5.17.0's
// rules (validate_architecture).
func (v *validator) qwen4Exp(a *Architecture) {
	if g := a.LinearAttention.GateAct; g != "sigmoid" && g != "silu" {
		v.add("architecture.linear_attention.gate_act", "is %q (expected \"sigmoid\" or \"silu\")", g)
	}
	hc := a.HyperConnections
	v.atLeast("architecture.hyper_connections.count", hc.Count, 2)
	v.positive("architecture.hyper_connections.lowrank", hc.LowRank)

	ix := a.Indexer
	v.positive("architecture.indexer.heads", ix.Heads)
	v.positive("architecture.indexer.head_dim", ix.HeadDim)
	v.positive("architecture.indexer.budget", ix.Budget)
	v.positive("architecture.indexer.compress_ratio", ix.CompressRatio)
	if ix.KVHeads != 1 {
		v.add("architecture.indexer.kv_heads", "is %d (expected 1: the indexer has one shared key head)", ix.KVHeads)
	}
	if ix.CompressRatio > 0 && ix.Budget%ix.CompressRatio != 0 {
		v.add("architecture.indexer.budget", "is %d (expected a multiple of architecture.indexer.compress_ratio = %d)", ix.Budget, ix.CompressRatio)
	}
	if rd := a.Attention.RotaryDim(); ix.HeadDim > 0 && rd > ix.HeadDim {
		v.add("architecture.indexer.head_dim", "is %d (expected ≥ the rotary dim %d, since indexer heads are rotated like attention heads)", ix.HeadDim, rd)
	}

	p := a.PLE
	if len(p.LayerIDs) == 0 {
		return
	}
	v.atLeast("architecture.ple.ngram_size", p.NgramSize, 2)
	v.positive("architecture.ple.heads_per_ngram", p.HeadsPerNgram)
	v.positive("architecture.ple.embed_dim", p.EmbedDim)
	v.positive("architecture.ple.conv_kernel", p.ConvKernel)
	v.atLeast("architecture.ple.ngram_vocab_size_base", p.VocabSizeBase, 2)
	v.positive("architecture.ple.vocab_size_divisible_by", p.VocabDivisibleBy)
	v.positive("architecture.ple.split_parts", p.SplitParts)
	if n := p.NgramHeads(); n > 0 && p.EmbedDim%n != 0 {
		v.add("architecture.ple.embed_dim", "is %d (expected a multiple of the n-gram head count (ngram_size-1)·heads_per_ngram = %d)", p.EmbedDim, n)
	}
	for i, id := range p.LayerIDs {
		field := fmt.Sprintf("architecture.ple.layer_ids[%d]", i)
		switch {
		case id < 1 || id > a.NumLayers:
			v.add(field, "is %d (expected a 1-based layer number in 1 … %d)", id, a.NumLayers)
		case i > 0 && id <= p.LayerIDs[i-1]:
			v.add(field, "is %d (expected ascending, distinct layer numbers)", id)
		case id-1 < len(a.LayerTypes) && a.LayerTypes[id-1] != LayerLinearAttention:
			v.add(field, "is %d, a %s layer (expected a linear_attention layer)", id, a.LayerTypes[id-1])
		}
	}
	if len(a.EOSTokenIDs) == 0 {
		v.add("architecture.eos_token_ids", "is empty (expected the EOS id: the n-gram store resets its context at EOS)")
	}
	for i, id := range a.EOSTokenIDs {
		if id < 0 || id >= a.VocabSize {
			v.add(fmt.Sprintf("architecture.eos_token_ids[%d]", i), "is %d (expected a token id in 0 … %d)", id, a.VocabSize-1)
		}
	}
}

func (v *validator) quant(q *QuantPlan) {
	names := quant.Names()
	for _, f := range []struct{ class, name string }{
		{ClassTrunk, q.Trunk}, {ClassExperts, q.Experts}, {ClassEmbeddings, q.Embeddings}, {ClassHead, q.Head},
	} {
		if !slices.Contains(names, f.name) {
			v.add("quant."+f.class, "is %q (expected one of %s)", f.name, strings.Join(names, ", "))
		} else if qf, _ := quant.Lookup(f.name); qf.Encode == nil {
			v.add("quant."+f.class, "is %q, which strata decodes but cannot quantize (no quantizer for it; a file that holds it runs as it is); plan one of %s", f.name, strings.Join(quant.Quantizable(), ", "))
		}
	}
	if q.Router != "" && !slices.Contains(names, q.Router) {
		v.add("quant."+ClassRouter, "is %q (expected one of %s, or empty for the trunk's format)", q.Router, strings.Join(names, ", "))
	}
	if _, err := q.RowPolicy(); err != nil {
		v.add("quant.rows", "is %q (expected \"fallback\", \"pad\" or \"smallest\"; empty means fallback)", q.Rows)
	}
}
