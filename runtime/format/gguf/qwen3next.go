package gguf

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The qwen3next name map: how llama.cpp's GGUF tensors (arch "qwen3next")
// hold our tensor roles (models.Config.Tensors names such as
// "layers.3.gdn.qkvz"). Source: ../shared/specs/qwen3_next.md §8.
//
// Most roles are one GGUF tensor each, byte for byte (GGUF ne is the torch
// shape reversed, so the row-major bytes are the same). The exceptions:
//
//   - values: GGUF stores the zero-centred RMSNorm weights with the +1 baked
//     in (all norms but the GDN's gated ssm_norm), and ssm_a = −exp(A_log);
//     our roles hold the HF values, so Transform converts;
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
// Row permutations act on whole rows, so they apply to quantized data as is.

// ArchQwenNext is general.architecture for Qwen3-Next.
const ArchQwenNext = "qwen3next"

// Transform relates a GGUF tensor's values to our role's values.
type Transform int

const (
	Same    Transform = iota
	PlusOne           // GGUF = 1 + role: the zero-centred RMSNorm weights
	NegExp            // GGUF = −exp(role): ssm_a from A_log
)

func (t Transform) String() string {
	switch t {
	case Same:
		return "same"
	case PlusOne:
		return "+1"
	case NegExp:
		return "-exp"
	}
	return fmt.Sprintf("Transform(%d)", int(t))
}

// ToGGUF maps one role value to its GGUF value (float32, as both are stored).
func (t Transform) ToGGUF(v float32) float32 {
	switch t {
	case PlusOne:
		return 1 + v
	case NegExp:
		return float32(-math.Exp(float64(v)))
	}
	return v
}

// FromGGUF inverts ToGGUF. For NegExp the GGUF value must be negative (a
// decay rate); anything else has no A_log and yields NaN.
func (t Transform) FromGGUF(v float32) float32 {
	switch t {
	case PlusOne:
		return v - 1
	case NegExp:
		return float32(math.Log(-float64(v)))
	}
	return v
}

// qwenNextGlobal maps the roles outside the layers.
var qwenNextGlobal = map[string]struct {
	name string
	tr   Transform
}{
	"embed":      {"token_embd.weight", Same},
	"head":       {"output.weight", Same},
	"final_norm": {"output_norm.weight", PlusOne},
}

// qwenNextLayer maps the per-layer roles that are one tensor each; the name
// goes after "blk.{l}.".
var qwenNextLayer = map[string]struct {
	name string
	tr   Transform
}{
	"attn_norm":        {"attn_norm.weight", PlusOne},
	"ffn_norm":         {"post_attention_norm.weight", PlusOne},
	"gdn.ba":           {"ssm_ba.weight", Same},
	"gdn.conv":         {"ssm_conv1d.weight", Same},
	"gdn.a_log":        {"ssm_a", NegExp},
	"gdn.dt_bias":      {"ssm_dt.bias", Same},
	"gdn.norm":         {"ssm_norm.weight", Same},
	"gdn.out":          {"ssm_out.weight", Same},
	"attn.q":           {"attn_q.weight", Same},
	"attn.k":           {"attn_k.weight", Same},
	"attn.v":           {"attn_v.weight", Same},
	"attn.o":           {"attn_output.weight", Same},
	"attn.q_norm":      {"attn_q_norm.weight", PlusOne},
	"attn.k_norm":      {"attn_k_norm.weight", PlusOne},
	"moe.router":       {"ffn_gate_inp.weight", Same},
	"moe.experts.gate": {"ffn_gate_exps.weight", Same},
	"moe.experts.up":   {"ffn_up_exps.weight", Same},
	"moe.experts.down": {"ffn_down_exps.weight", Same},
	"moe.shared.gate":  {"ffn_gate_shexp.weight", Same},
	"moe.shared.up":    {"ffn_up_shexp.weight", Same},
	"moe.shared.down":  {"ffn_down_shexp.weight", Same},
	"moe.shared_gate":  {"ffn_gate_inp_shexp.weight", Same},
}

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

// RowRun moves Rows rows: rows [TensorRow, TensorRow+Rows) of GGUF tensor
// Tensor are rows [RoleRow, RoleRow+Rows) of the role. For stacked expert
// tensors the rows count within each expert's slice.
type RowRun struct {
	Tensor             string
	TensorRow, RoleRow int
	Rows               int
}

// RoleMap says where one role lives in a GGUF file: either a whole tensor
// (Tensor, with Runs nil) or rows gathered from slices of tensors (Runs, in
// role row order, covering the role exactly), with the value transform. A
// whole tensor may hold each row's columns in another order (Cols, in role
// column order, covering the row exactly; nil: the same order).
type RoleMap struct {
	Role      string
	Tensor    string
	Runs      []RowRun
	Cols      []ColRun
	Transform Transform
}

// QwenNextRole maps one role (a models.TensorSpec name: "embed",
// "layers.3.gdn.qkvz", …) to GGUF tensors under the given layout.
func QwenNextRole(d QwenNextDims, form QwenNextForm, role string) (RoleMap, error) {
	if g, ok := qwenNextGlobal[role]; ok {
		return RoleMap{Role: role, Tensor: g.name, Transform: g.tr}, nil
	}
	layer, sub, ok := splitLayerRole(role)
	if !ok {
		return RoleMap{}, fmt.Errorf("qwen3next: no GGUF tensor for role %q", role)
	}
	blk := "blk." + strconv.Itoa(layer) + "."
	switch {
	case sub == "gdn.qkvz" && form.LegacySSMIn:
		return RoleMap{Role: role, Tensor: blk + nameSSMIn}, nil
	case sub == "gdn.qkvz":
		if d.KeyHeads <= 0 || d.ValueHeads <= 0 || d.ValueHeads%d.KeyHeads != 0 || d.KeyHeadDim <= 0 || d.ValueHeadDim <= 0 {
			return RoleMap{}, fmt.Errorf("qwen3next: role %s: GDN dims %d key heads × %d, %d value heads × %d cannot be regrouped", role, d.KeyHeads, d.KeyHeadDim, d.ValueHeads, d.ValueHeadDim)
		}
		nk, dk := d.KeyHeads, d.KeyHeadDim
		rv := d.ValueHeads / nk * d.ValueHeadDim // v (or z) rows per key-head group
		qkv, gate := blk+nameAttnQKV, blk+nameAttnGate
		runs := make([]RowRun, 0, 4*nk)
		for g := 0; g < nk; g++ {
			base := g * (2*dk + 2*rv)
			runs = append(runs,
				RowRun{qkv, g * dk, base, dk},                // q_g
				RowRun{qkv, nk*dk + g*dk, base + dk, dk},     // k_g
				RowRun{qkv, 2*nk*dk + g*rv, base + 2*dk, rv}, // v of g's value heads
				RowRun{gate, g * rv, base + 2*dk + rv, rv})   // z of g's value heads
		}
		return RoleMap{Role: role, Runs: runs}, nil
	case !form.LegacySSMIn && sub == "gdn.qkv": // split projections (models.LinearAttention.SplitProjections)
		return RoleMap{Role: role, Tensor: blk + nameAttnQKV}, nil
	case !form.LegacySSMIn && sub == "gdn.z":
		return RoleMap{Role: role, Tensor: blk + nameAttnGate}, nil
	case sub == "gdn.b" || sub == "gdn.a": // ssm_ba: per key head g, b then a of its value heads
		if d.KeyHeads <= 0 || d.ValueHeads <= 0 || d.ValueHeads%d.KeyHeads != 0 {
			return RoleMap{}, fmt.Errorf("qwen3next: role %s: GDN dims %d key heads, %d value heads cannot split ssm_ba", role, d.KeyHeads, d.ValueHeads)
		}
		r := d.ValueHeads / d.KeyHeads
		off := 0
		if sub == "gdn.a" {
			off = r
		}
		runs := make([]RowRun, d.KeyHeads)
		for g := range runs {
			runs[g] = RowRun{blk + qwenNextLayer["gdn.ba"].name, 2*g*r + off, g * r, r}
		}
		return RoleMap{Role: role, Runs: runs}, nil
	case form.FusedAttnQKV && (sub == "attn.q" || sub == "attn.k" || sub == "attn.v"):
		q := d.Heads * d.HeadDim
		if d.OutputGate {
			q *= 2
		}
		kv := d.KVHeads * d.HeadDim
		if q <= 0 || kv <= 0 {
			return RoleMap{}, fmt.Errorf("qwen3next: role %s: attention dims %d heads, %d kv heads × %d cannot split attn_qkv", role, d.Heads, d.KVHeads, d.HeadDim)
		}
		start, rows := 0, q
		switch sub {
		case "attn.k":
			start, rows = q, kv
		case "attn.v":
			start, rows = q+kv, kv
		}
		return RoleMap{Role: role, Runs: []RowRun{{blk + nameAttnQKV, start, 0, rows}}}, nil
	case form.FusedGateUp && (sub == "moe.experts.gate" || sub == "moe.experts.up"):
		if d.ExpertFFN <= 0 {
			return RoleMap{}, fmt.Errorf("qwen3next: role %s: expert FFN size %d cannot split ffn_gate_up_exps", role, d.ExpertFFN)
		}
		start := 0
		if sub == "moe.experts.up" {
			start = d.ExpertFFN
		}
		return RoleMap{Role: role, Runs: []RowRun{{blk + nameGateUpExps, start, 0, d.ExpertFFN}}}, nil
	}
	if m, ok := qwenNextLayer[sub]; ok {
		return RoleMap{Role: role, Tensor: blk + m.name, Transform: m.tr}, nil
	}
	return RoleMap{}, fmt.Errorf("qwen3next: no GGUF tensor for role %q", role)
}

// QwenNextRoleOf maps a GGUF tensor name back to the role it holds whole
// (fused and split tensors feed several roles and are not listed).
func QwenNextRoleOf(name string) (role string, tr Transform, ok bool) {
	for r, g := range qwenNextGlobal {
		if g.name == name {
			return r, g.tr, true
		}
	}
	rest, found := strings.CutPrefix(name, "blk.")
	if !found {
		return "", Same, false
	}
	num, sub, found := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !found || err != nil || l < 0 || strconv.Itoa(l) != num {
		return "", Same, false
	}
	if sub == nameSSMIn {
		return fmt.Sprintf("layers.%d.gdn.qkvz", l), Same, true
	}
	for r, m := range qwenNextLayer {
		if m.name == sub {
			return fmt.Sprintf("layers.%d.%s", l, r), m.tr, true
		}
	}
	return "", Same, false
}

// splitLayerRole splits "layers.{l}.{sub}".
func splitLayerRole(role string) (int, string, bool) {
	rest, ok := strings.CutPrefix(role, "layers.")
	if !ok {
		return 0, "", false
	}
	num, sub, ok := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !ok || err != nil || l < 0 || strconv.Itoa(l) != num {
		return 0, "", false
	}
	return l, sub, true
}
