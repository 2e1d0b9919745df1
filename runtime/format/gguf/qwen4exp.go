package gguf

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

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

// ArchQwen4Exp is general.architecture for Qwen3.8-Flash-Next.
const ArchQwen4Exp = "qwen4exp"

// NameNgramTable is the n-gram table of the (single) PLE layer.
const NameNgramTable = "per_layer_token_embd.weight"

// KeyQwen4ExpNames records which revision of this name map wrote a file (it
// follows readings of llama.cpp's converter, not the converter itself, so a
// correction bumps it and older files stay recognisable).
const (
	KeyQwen4ExpNames     = "strata.qwen4exp_names"
	Qwen4ExpNamesVersion = 1
)

// ColRun moves Cols columns of every row: columns [TensorCol, TensorCol+Cols)
// of the GGUF tensor are columns [RoleCol, RoleCol+Cols) of the role. A 1-D
// tensor is one row.
type ColRun struct {
	TensorCol, RoleCol, Cols int
}

type nameTr struct {
	name string
	tr   Transform
}

var qwen4ExpGlobal = map[string]nameTr{
	"embed":      {"token_embd.weight", Same},
	"head":       {"output.weight", Same},
	"mixer.norm": {"output_hc_norm.weight", PlusOne},
	"mixer.down": {"output_hc_down.weight", Same},
	"mixer.up":   {"output_hc_up.weight", Same},
}

// qwen4ExpLayer maps the per-layer roles stored whole and in HF order; the
// name goes after "blk.{l}.".
var qwen4ExpLayer = map[string]nameTr{
	"attn_hc.norm":      {"hc_attn_norm.weight", PlusOne},
	"attn_hc.down":      {"hc_attn_down.weight", Same},
	"attn_hc.up":        {"hc_attn_up.weight", Same},
	"attn_hc.inject":    {"hc_attn_inject.weight", Same},
	"mlp_hc.norm":       {"hc_ffn_norm.weight", PlusOne},
	"mlp_hc.down":       {"hc_ffn_down.weight", Same},
	"mlp_hc.up":         {"hc_ffn_up.weight", Same},
	"mlp_hc.inject":     {"hc_ffn_inject.weight", Same},
	"gdn.norm":          {"ssm_norm.weight", Same}, // shared by all value heads: not reordered
	"attn.q":            {"attn_q.weight", Same},
	"attn.k":            {"attn_k.weight", Same},
	"attn.v":            {"attn_v.weight", Same},
	"attn.o":            {"attn_output.weight", Same},
	"attn.q_norm":       {"attn_q_norm.weight", PlusOne},
	"attn.k_norm":       {"attn_k_norm.weight", PlusOne},
	"attn.index_q_norm": {"indexer.q_norm.weight", PlusOne},
	"attn.index_k_norm": {"indexer.k_norm.weight", PlusOne},
	"ple.key":           {"ple_key.weight", Same},
	"ple.value":         {"ple_value.weight", Same},
	"ple.norm_key":      {"ple_norm_key.weight", PlusOne},
	"ple.norm_query":    {"ple_norm_query.weight", PlusOne},
	"ple.norm_conv":     {"ple_norm_conv.weight", PlusOne},
	"ple.conv":          {"ple_conv1d.weight", Same},
	"moe.router":        {"ffn_gate_inp.weight", Same},
	"moe.experts.gate":  {"ffn_gate_exps.weight", Same},
	"moe.experts.up":    {"ffn_up_exps.weight", Same},
	"moe.experts.down":  {"ffn_down_exps.weight", Same},
	"moe.shared.gate":   {"ffn_gate_shexp.weight", Same},
	"moe.shared.up":     {"ffn_up_shexp.weight", Same},
	"moe.shared.down":   {"ffn_down_shexp.weight", Same},
	"moe.shared_gate":   {"ffn_gate_inp_shexp.weight", Same},
}

// qwen4ExpMTP are the MTP head's own tensors, on block num_layers (the
// decoder layer's tensors follow on the same block). Ours: llama.cpp has no
// qwen4exp MTP; the hc_head names are those of its MTP sidecar files, the fc
// pair is split where those files fuse an eh_proj of undocumented half order.
var qwen4ExpMTP = map[string]nameTr{
	"mtp.fc_embedding":          {"nextn.fc_embd.weight", Same},
	"mtp.fc_hidden":             {"nextn.fc_hidden.weight", Same},
	"mtp.pre_fc_norm_embedding": {"nextn.enorm.weight", PlusOne},
	"mtp.pre_fc_norm_hidden":    {"nextn.hnorm.weight", PlusOne},
	"mtp.mixer.norm":            {"nextn.hc_head_norm.weight", PlusOne},
	"mtp.mixer.down":            {"nextn.hc_head_down.weight", Same},
	"mtp.mixer.up":              {"nextn.hc_head_up.weight", Same},
}

// Qwen4ExpDims are the sizes the qwen4exp name map needs.
type Qwen4ExpDims struct {
	Layers                                         int // trunk layers; MTP layer i is block Layers+i
	KeyHeads, ValueHeads, KeyHeadDim, ValueHeadDim int // Gated DeltaNet
	IndexerHeads, IndexerHeadDim                   int
	PLELayers                                      []int // 0-based layers with an n-gram table
}

// Qwen4ExpRole maps one role (a models.TensorSpec name) to GGUF tensors.
func Qwen4ExpRole(d Qwen4ExpDims, role string) (RoleMap, error) {
	if g, ok := qwen4ExpGlobal[role]; ok {
		return RoleMap{Role: role, Tensor: g.name, Transform: g.tr}, nil
	}
	if m, ok := qwen4ExpMTP[role]; ok {
		return RoleMap{Role: role, Tensor: fmt.Sprintf("blk.%d.%s", d.Layers, m.name), Transform: m.tr}, nil
	}
	if rest, ok := strings.CutPrefix(role, "mtp."); ok {
		l, sub, ok := splitLayerRole(rest)
		if !ok {
			return RoleMap{}, fmt.Errorf("qwen4exp: no GGUF tensor for role %q", role)
		}
		m, err := qwen4ExpLayerRole(d, d.Layers+l, sub)
		if err != nil {
			return RoleMap{}, fmt.Errorf("qwen4exp: role %s: %w", role, err)
		}
		m.Role = role
		return m, nil
	}
	l, sub, ok := splitLayerRole(role)
	if !ok {
		return RoleMap{}, fmt.Errorf("qwen4exp: no GGUF tensor for role %q", role)
	}
	m, err := qwen4ExpLayerRole(d, l, sub)
	if err != nil {
		return RoleMap{}, fmt.Errorf("qwen4exp: role %s: %w", role, err)
	}
	m.Role = role
	return m, nil
}

// qwen4ExpLayerRole maps the role sub of block l.
func qwen4ExpLayerRole(d Qwen4ExpDims, l int, sub string) (RoleMap, error) {
	blk := "blk." + strconv.Itoa(l) + "."
	nk, nv, dk, dv := d.KeyHeads, d.ValueHeads, d.KeyHeadDim, d.ValueHeadDim
	gdn := strings.HasPrefix(sub, "gdn.") && sub != "gdn.norm"
	if gdn && (nk <= 0 || nv <= 0 || nv%nk != 0 || dk <= 0 || dv <= 0) {
		return RoleMap{}, fmt.Errorf("GDN dims %d key heads × %d, %d value heads × %d cannot be reordered", nk, dk, nv, dv)
	}
	rows := func(tensor string, base, w int) []RowRun {
		var runs []RowRun
		if base > 0 {
			runs = append(runs, RowRun{tensor, 0, 0, base})
		}
		for _, p := range tiled(nk, nv) {
			runs = append(runs, RowRun{tensor, base + p.gguf*w, base + p.hf*w, w})
		}
		return mergeRows(runs)
	}
	cols := func(w int) []ColRun {
		var runs []ColRun
		for _, p := range tiled(nk, nv) {
			runs = append(runs, ColRun{p.gguf * w, p.hf * w, w})
		}
		return mergeCols(runs)
	}
	switch sub {
	case "gdn.qkv":
		return RoleMap{Runs: rows(blk+"attn_qkv.weight", 2*nk*dk, dv)}, nil
	case "gdn.z":
		return RoleMap{Runs: rows(blk+"attn_gate.weight", 0, dv)}, nil
	case "gdn.b":
		return RoleMap{Runs: rows(blk+"ssm_beta.weight", 0, 1)}, nil
	case "gdn.a":
		return RoleMap{Runs: rows(blk+"ssm_alpha.weight", 0, 1)}, nil
	case "gdn.conv":
		return RoleMap{Runs: rows(blk+"ssm_conv1d.weight", 2*nk*dk, dv)}, nil
	case "gdn.a_log":
		return RoleMap{Tensor: blk + "ssm_a", Cols: cols(1), Transform: NegExp}, nil
	case "gdn.dt_bias":
		return RoleMap{Tensor: blk + "ssm_dt.bias", Cols: cols(1)}, nil
	case "gdn.out":
		return RoleMap{Tensor: blk + "ssm_out.weight", Cols: cols(dv)}, nil
	case "attn.index_qk":
		q := d.IndexerHeads * d.IndexerHeadDim
		if q <= 0 || d.IndexerHeadDim <= 0 {
			return RoleMap{}, fmt.Errorf("indexer dims %d heads × %d cannot split index_qk", d.IndexerHeads, d.IndexerHeadDim)
		}
		return RoleMap{Runs: []RowRun{{blk + "indexer.q_proj.weight", 0, 0, q}, {blk + "indexer.k_proj.weight", 0, q, d.IndexerHeadDim}}}, nil
	case "ple.table":
		if len(d.PLELayers) == 0 || d.PLELayers[0] != l {
			return RoleMap{}, fmt.Errorf("only the first PLE layer's n-gram table has a GGUF tensor (%s); PLE layers %v", NameNgramTable, d.PLELayers)
		}
		return RoleMap{Tensor: NameNgramTable}, nil
	}
	if m, ok := qwen4ExpLayer[sub]; ok {
		return RoleMap{Tensor: blk + m.name, Transform: m.tr}, nil
	}
	return RoleMap{}, errors.New("no GGUF tensor for it")
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
func mergeRows(runs []RowRun) []RowRun {
	var out []RowRun
	for _, r := range runs {
		if n := len(out); n > 0 && out[n-1].Tensor == r.Tensor && out[n-1].TensorRow+out[n-1].Rows == r.TensorRow && out[n-1].RoleRow+out[n-1].Rows == r.RoleRow {
			out[n-1].Rows += r.Rows
			continue
		}
		out = append(out, r)
	}
	return out
}

func mergeCols(runs []ColRun) []ColRun {
	slices.SortFunc(runs, func(a, b ColRun) int { return a.RoleCol - b.RoleCol })
	var out []ColRun
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

func (f *File) has(key string) bool {
	_, ok := f.kvIndex[key]
	return ok
}

// Ints returns an array of any integer element type as int64 values (a
// uint64 above MaxInt64 is an error): writers differ in the width they use.
func (f *File) Ints(key string) ([]int64, error) {
	a, err := f.Array(key)
	if err != nil {
		return nil, err
	}
	out, ok := int64s(a.Values)
	if !ok {
		return nil, fmt.Errorf("gguf %s: metadata key %s is an array of %s, want integers that fit int64", f.Path, key, a.Elem)
	}
	return out, nil
}

func int64s(vs any) ([]int64, bool) {
	conv := func(n int, at func(i int) int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = at(i)
		}
		return out
	}
	switch s := vs.(type) {
	case []uint8:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []int8:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []uint16:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []int16:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []uint32:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []int32:
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	case []int64:
		return slices.Clone(s), true
	case []uint64:
		for _, v := range s {
			if v > math.MaxInt64 {
				return nil, false
			}
		}
		return conv(len(s), func(i int) int64 { return int64(s[i]) }), true
	}
	return nil, false
}
