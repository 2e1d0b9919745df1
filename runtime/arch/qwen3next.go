package arch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// QwenNext is Qwen3-Next (HF model_type qwen3_next, GGUF architecture
// qwen3next, llama.cpp's src/models/qwen3next.cpp): Gated DeltaNet layers
// with a gated full-attention layer every full_attention_interval, MoE with
// a shared expert in every layer. ../shared/specs/qwen3_next.md §8 is the
// source of the keys. What no key says (HF's defaults for Qwen3-Next's
// released configs, docs/gguf.md): hidden_act silu, norm_topk_prob true,
// decoder_sparse_step 1, no MTP head read back.
var QwenNext = &Arch{
	GGUF:      "qwen3next",
	ModelType: models.TypeQwen3Next,
	HFTypes:   []string{models.TypeQwen3Next},
	Params: []Param{
		pBlockCount,
		pContext,
		pHidden,
		hfOr(0, field("feed_forward_length", "intermediate_size", "architecture.moe.dense_intermediate_size", func(a *models.Architecture) *int { return &a.MoE.DenseIntermediateSize })),
		pHeads,
		pKVHeads,
		pKeyLength,
		pValueLength,
		rmsEps(false),
		ropeTheta(false),
		ropeDim(0.25), // qwen3_next's config default (the generic rotary code's 1.0 never applies to it)
		pExperts,
		pExpertsUsed,
		pExpertFFN,
		pSharedFFN,
		pConvKernel,
		pInnerSize,
		pStateSize,
		pTimeStepRank,
		pGroupCount,
		pInterval(models.LayerFullAttention, func(a *models.Architecture, v Value, m Meta) error {
			// HF's qwen3_next config: every interval-th layer is full attention.
			if v.Int < 1 {
				return fmt.Errorf("gguf %s: %s = %d, want a positive interval", m.f.Path, m.Key("full_attention_interval"), v.Int)
			}
			if a.NumLayers > maxLayers { // a corrupt count must not allocate gigabytes
				return fmt.Errorf("gguf %s: %s = %d, want at most %d", m.f.Path, m.Key(pBlockCount.Key), a.NumLayers, maxLayers)
			}
			a.LayerTypes = make([]string, a.NumLayers)
			for i := range a.LayerTypes {
				a.LayerTypes[i] = models.LayerLinearAttention
				if (i+1)%v.Int == 0 {
					a.LayerTypes[i] = models.LayerFullAttention
				}
			}
			return nil
		}, nil),
		// Written for the MTP head; llama.cpp's files have none, so a reader
		// keeps none. vLLM reads the depth from HF's key; absent means none.
		pNextN(nil, func(a *models.Architecture, r *hfReader) { a.MTP.NumLayers, _ = r.int("num_nextn_predict_layers") }),
		// HF only.
		hfVocab,
		hfAct,
		hfTie,
		hfEOS,
		hfAttentionBias,
		hfRopeScaling,
		hfOnly("norm_topk_prob", "architecture.moe.norm_topk_prob", func(a *models.Architecture, r *hfReader) { a.MoE.NormTopKProb = r.reqBool("norm_topk_prob") }),
		hfOnlyInt("decoder_sparse_step", "architecture.moe.decoder_sparse_step", func(a *models.Architecture) *int { return &a.MoE.DecoderSparseStep }),
		hfMLPOnly,
	},
	hfFixed: func(a *models.Architecture) {
		a.Attention.OutputGate = true
		a.LinearAttention.GateAct = "silu" // fixed in qwen3_next's RMSNormGated
	},
	writable: func(a *models.Architecture) []error {
		var errs []error
		if la := a.LinearAttention; la.GateAct != "" && la.GateAct != "silu" {
			errs = append(errs, fmt.Errorf("linear_attention.gate_act is %q (qwen3next uses silu)", la.GateAct))
		}
		return gatedEvery(a, "qwen3next", models.LayerFullAttention, errs)
	},
	finish: func(f *gguf.File, a *models.Architecture, _ Meta) error { return qwenDefaults(f, a, "silu") },
	names: func(c *models.Config, has func(string) bool) Names {
		a := &c.Architecture
		// We write llama.cpp's current form: attn_qkv + attn_gate for the
		// GDN input, gate and up experts apart, q/k/v apart.
		var form QwenNextForm
		gdn, attn := -1, -1
		for l, t := range a.LayerTypes {
			if t == models.LayerLinearAttention && gdn < 0 {
				gdn = l
			}
			if t == models.LayerFullAttention && attn < 0 {
				attn = l
			}
		}
		if has != nil {
			form = DetectQwenNextForm(has, gdn, attn)
		}
		dims := QwenNextDimsOf(c)
		return Names{
			Role: func(role string) (gguf.RoleMap, error) {
				return QwenNextModelRole(dims, form, a.NumLayers, role)
			},
			SplitGDN: has != nil && gdn >= 0 && !form.LegacySSMIn,
		}
	},
}

// maxLayers bounds a layer count read from a file.
const maxLayers = 1 << 16

// QwenNextDims are the sizes the qwen3next name map needs, from a config.
func QwenNextDimsOf(c *models.Config) QwenNextDims {
	a := &c.Architecture
	la := a.LinearAttention
	return QwenNextDims{
		KeyHeads: la.NumKeyHeads, ValueHeads: la.NumValueHeads, KeyHeadDim: la.KeyHeadDim, ValueHeadDim: la.ValueHeadDim,
		Heads: a.Attention.NumHeads, KVHeads: a.Attention.NumKVHeads, HeadDim: a.Attention.HeadDim,
		OutputGate: a.Attention.OutputGate, ExpertFFN: a.MoE.IntermediateSize,
	}
}

// The qwen3next name map: how llama.cpp's GGUF tensors (arch "qwen3next")
// hold our tensor roles (models.Config.Tensors names such as
// "layers.3.gdn.qkvz"). Source: ../shared/specs/qwen3_next.md §8.
//
// Most roles are one GGUF tensor each, byte for byte (GGUF ne is the torch
// shape reversed, so the row-major bytes are the same). The exceptions:
//
//   - values: GGUF stores the zero-centred RMSNorm weights with the +1 baked
//     in (all norms but the GDN's gated ssm_norm), and ssm_a = −exp(A_log);
//     our roles hold the HF values, so gguf.Transform converts;
//   - the GDN input projection gdn.qkvz (HF's grouped order: per key head g,
//     q_g, k_g, then v and z of its value heads) is, in current llama.cpp
//     files, split into attn_qkv (flat [Q all | K all | V all]) and attn_gate
//     (Z, in value-head order); older files (llama.cpp before March 2026) have
//     ssm_in in the grouped order as is. Both are read. With split
//     projections (models.LinearAttention.SplitProjections, which the loader
//     sets for attn_qkv + attn_gate files) the roles are gdn.qkv, gdn.z (those
//     two tensors whole, in place) and gdn.b, gdn.a (rows of ssm_ba);
//   - optional fused forms: ffn_gate_up_exps (per expert, gate rows then up
//     rows) for the routed experts, and attn_qkv on full-attention layers
//     (q with its gate, then k, then v).
//

// qwenNextGlobal maps the roles outside the layers.
var qwenNextGlobal = map[string]nameTr{
	"embed":      {"token_embd.weight", gguf.Same},
	"head":       {"output.weight", gguf.Same},
	"final_norm": {"output_norm.weight", gguf.PlusOne},
}

// qwenNextLayer maps the per-layer roles that are one tensor each; the name
// goes after "blk.{l}.".
var qwenNextLayer = withShared(map[string]nameTr{
	"attn_norm":   {"attn_norm.weight", gguf.PlusOne},
	"ffn_norm":    {"post_attention_norm.weight", gguf.PlusOne},
	"gdn.ba":      {"ssm_ba.weight", gguf.Same},
	"gdn.conv":    {"ssm_conv1d.weight", gguf.Same},
	"gdn.a_log":   {"ssm_a", gguf.NegExp},
	"gdn.dt_bias": {"ssm_dt.bias", gguf.Same},
	"gdn.norm":    {"ssm_norm.weight", gguf.Same},
	"gdn.out":     {"ssm_out.weight", gguf.Same},
})

// Fused and split GGUF tensors, after "blk.{l}.".
const (
	nameSSMIn      = "ssm_in.weight"           // legacy gdn.qkvz, grouped order
	nameAttnQKV    = "attn_qkv.weight"         // GDN: flat q|k|v; full attention: q(+gate)|k|v
	nameAttnGate   = "attn_gate.weight"        // GDN z, value-head order
	nameGateUpExps = "ffn_gate_up_exps.weight" // routed experts, gate rows then up rows
)

// QwenNextDims are the sizes the name map needs to regroup rows.
type QwenNextDims struct {
	KeyHeads, ValueHeads, KeyHeadDim, ValueHeadDim int // Gated DeltaNet
	Heads, KVHeads, HeadDim                        int // full attention
	OutputGate                                     bool
	ExpertFFN                                      int // moe_intermediate_size
}

// QwenNextForm says which of the known layouts a file uses.
type QwenNextForm struct {
	LegacySSMIn  bool // gdn.qkvz as ssm_in (grouped order) rather than attn_qkv + attn_gate
	FusedGateUp  bool // routed experts' gate and up as one ffn_gate_up_exps
	FusedAttnQKV bool // full-attention q, k, v as one attn_qkv
}

// DetectQwenNextForm inspects which tensors a file has, given one GDN layer
// and one full-attention layer to look at (−1 when the model has none).
func DetectQwenNextForm(has func(name string) bool, gdnLayer, attnLayer int) QwenNextForm {
	var f QwenNextForm
	blk := func(l int, n string) string { return "blk." + strconv.Itoa(l) + "." + n }
	if gdnLayer >= 0 {
		f.LegacySSMIn = has(blk(gdnLayer, nameSSMIn)) && !has(blk(gdnLayer, nameAttnQKV))
		f.FusedGateUp = has(blk(gdnLayer, nameGateUpExps))
	}
	if attnLayer >= 0 {
		f.FusedAttnQKV = has(blk(attnLayer, nameAttnQKV)) && !has(blk(attnLayer, "attn_q.weight"))
		f.FusedGateUp = f.FusedGateUp || has(blk(attnLayer, nameGateUpExps))
	}
	return f
}

// QwenNextRole maps one role (a models.TensorSpec name: "embed",
// "layers.3.gdn.qkvz", …) to GGUF tensors under the given layout.
func QwenNextRole(d QwenNextDims, form QwenNextForm, role string) (gguf.RoleMap, error) {
	if g, ok := qwenNextGlobal[role]; ok {
		return gguf.RoleMap{Role: role, Tensor: g.name, Transform: g.tr}, nil
	}
	layer, sub, ok := splitLayerRole(role)
	if !ok {
		return gguf.RoleMap{}, fmt.Errorf("qwen3next: no GGUF tensor for role %q", role)
	}
	blk := "blk." + strconv.Itoa(layer) + "."
	switch {
	case sub == "gdn.qkvz" && form.LegacySSMIn:
		return gguf.RoleMap{Role: role, Tensor: blk + nameSSMIn}, nil
	case sub == "gdn.qkvz":
		if d.KeyHeads <= 0 || d.ValueHeads <= 0 || d.ValueHeads%d.KeyHeads != 0 || d.KeyHeadDim <= 0 || d.ValueHeadDim <= 0 {
			return gguf.RoleMap{}, fmt.Errorf("qwen3next: role %s: GDN dims %d key heads × %d, %d value heads × %d cannot be regrouped", role, d.KeyHeads, d.KeyHeadDim, d.ValueHeads, d.ValueHeadDim)
		}
		nk, dk := d.KeyHeads, d.KeyHeadDim
		rv := d.ValueHeads / nk * d.ValueHeadDim // v (or z) rows per key-head group
		qkv, gate := blk+nameAttnQKV, blk+nameAttnGate
		runs := make([]gguf.RowRun, 0, 4*nk)
		for g := 0; g < nk; g++ {
			base := g * (2*dk + 2*rv)
			runs = append(runs,
				rowRun(qkv, g*dk, base, dk),              // q_g
				rowRun(qkv, nk*dk+g*dk, base+dk, dk),     // k_g
				rowRun(qkv, 2*nk*dk+g*rv, base+2*dk, rv), // v of g's value heads
				rowRun(gate, g*rv, base+2*dk+rv, rv))     // z of g's value heads
		}
		return gguf.RoleMap{Role: role, Runs: runs}, nil
	case !form.LegacySSMIn && sub == "gdn.qkv": // split projections (models.LinearAttention.SplitProjections)
		return gguf.RoleMap{Role: role, Tensor: blk + nameAttnQKV}, nil
	case !form.LegacySSMIn && sub == "gdn.z":
		return gguf.RoleMap{Role: role, Tensor: blk + nameAttnGate}, nil
	case sub == "gdn.b" || sub == "gdn.a": // ssm_ba: per key head g, b then a of its value heads
		if d.KeyHeads <= 0 || d.ValueHeads <= 0 || d.ValueHeads%d.KeyHeads != 0 {
			return gguf.RoleMap{}, fmt.Errorf("qwen3next: role %s: GDN dims %d key heads, %d value heads cannot split ssm_ba", role, d.KeyHeads, d.ValueHeads)
		}
		r := d.ValueHeads / d.KeyHeads
		off := 0
		if sub == "gdn.a" {
			off = r
		}
		runs := make([]gguf.RowRun, d.KeyHeads)
		for g := range runs {
			runs[g] = rowRun(blk+qwenNextLayer["gdn.ba"].name, 2*g*r+off, g*r, r)
		}
		return gguf.RoleMap{Role: role, Runs: runs}, nil
	case form.FusedAttnQKV && (sub == "attn.q" || sub == "attn.k" || sub == "attn.v"):
		q := d.Heads * d.HeadDim
		if d.OutputGate {
			q *= 2
		}
		kv := d.KVHeads * d.HeadDim
		if q <= 0 || kv <= 0 {
			return gguf.RoleMap{}, fmt.Errorf("qwen3next: role %s: attention dims %d heads, %d kv heads × %d cannot split attn_qkv", role, d.Heads, d.KVHeads, d.HeadDim)
		}
		start, rows := 0, q
		switch sub {
		case "attn.k":
			start, rows = q, kv
		case "attn.v":
			start, rows = q+kv, kv
		}
		return gguf.RoleMap{Role: role, Runs: []gguf.RowRun{rowRun(blk+nameAttnQKV, start, 0, rows)}}, nil
	case form.FusedGateUp && (sub == "moe.experts.gate" || sub == "moe.experts.up"):
		if d.ExpertFFN <= 0 {
			return gguf.RoleMap{}, fmt.Errorf("qwen3next: role %s: expert FFN size %d cannot split ffn_gate_up_exps", role, d.ExpertFFN)
		}
		start := 0
		if sub == "moe.experts.up" {
			start = d.ExpertFFN
		}
		return gguf.RoleMap{Role: role, Runs: []gguf.RowRun{rowRun(blk+nameGateUpExps, start, 0, d.ExpertFFN)}}, nil
	}
	if m, ok := qwenNextLayer[sub]; ok {
		return gguf.RoleMap{Role: role, Tensor: blk + m.name, Transform: m.tr}, nil
	}
	return gguf.RoleMap{}, fmt.Errorf("qwen3next: no GGUF tensor for role %q", role)
}

// QwenNextRoleOf maps a GGUF tensor name back to the role it holds whole
// (fused and split tensors feed several roles and are not listed).
func QwenNextRoleOf(name string) (role string, tr gguf.Transform, ok bool) {
	for r, g := range qwenNextGlobal {
		if g.name == name {
			return r, g.tr, true
		}
	}
	rest, found := strings.CutPrefix(name, "blk.")
	if !found {
		return "", gguf.Same, false
	}
	num, sub, found := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !found || err != nil || l < 0 || strconv.Itoa(l) != num {
		return "", gguf.Same, false
	}
	if sub == nameSSMIn {
		return fmt.Sprintf("layers.%d.gdn.qkvz", l), gguf.Same, true
	}
	for r, m := range qwenNextLayer {
		if m.name == sub {
			return fmt.Sprintf("layers.%d.%s", l, r), m.tr, true
		}
	}
	return "", gguf.Same, false
}

// MTP tensors of qwen3next. llama.cpp has no Qwen3-Next MTP tensors; we
// follow its "next-n" names (GLM-4.5's): MTP layer i is block
// num_layers + i, with the decoder layer's usual names plus these.
var qwenNextMTP = map[string]nameTr{
	"mtp.fc":                    {"nextn.eh_proj.weight", gguf.Same},             // [norm(e) ‖ norm(h)] → hidden
	"mtp.pre_fc_norm_embedding": {"nextn.enorm.weight", gguf.PlusOne},            // zero-centred, like every norm
	"mtp.pre_fc_norm_hidden":    {"nextn.hnorm.weight", gguf.PlusOne},            //
	"mtp.norm":                  {"nextn.shared_head_norm.weight", gguf.PlusOne}, // before the shared head
}

// QwenNextModelRole is QwenNextRole for a whole model of numLayers trunk
// layers: it also maps the MTP head's roles ("mtp.fc", "mtp.layers.0.attn.q",
// …) to blocks numLayers, numLayers+1, … .
func QwenNextModelRole(d QwenNextDims, form QwenNextForm, numLayers int, role string) (gguf.RoleMap, error) {
	rest, ok := strings.CutPrefix(role, "mtp.")
	if !ok {
		return QwenNextRole(d, form, role)
	}
	if m, ok := qwenNextMTP[role]; ok {
		// One set of next-n tensors, on the first MTP block.
		return gguf.RoleMap{Role: role, Tensor: fmt.Sprintf("blk.%d.%s", numLayers, m.name), Transform: m.tr}, nil
	}
	l, sub, ok := splitLayerRole(rest)
	if !ok {
		return gguf.RoleMap{}, fmt.Errorf("qwen3next: no GGUF tensor for role %q", role)
	}
	m, err := QwenNextRole(d, form, "layers."+strconv.Itoa(numLayers+l)+"."+sub)
	if err != nil {
		return gguf.RoleMap{}, fmt.Errorf("qwen3next: role %s: %w", role, err)
	}
	m.Role = role
	return m, nil
}
