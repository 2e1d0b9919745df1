package arch

import (
	"reflect"
	"slices"
	"testing"

	"github.com/strata-llm/strata/runtime/format/gguf"
)

// flashNext are the dims of Qwen3.8-Flash-Next (qwen4_exp.md §1): 48 layers,
// PLE on 0-based layer 1, MTP on block 48.
var flashNext = Qwen4ExpDims{Layers: 48, KeyHeads: 16, ValueHeads: 48, KeyHeadDim: 128, ValueHeadDim: 128,
	IndexerHeads: 4, IndexerHeadDim: 128, PLELayers: []int{1}}

func TestQwen4ExpNames(t *testing.T) {
	for role, w := range map[string]nameTr{
		"embed":                         {"token_embd.weight", gguf.Same},
		"head":                          {"output.weight", gguf.Same},
		"mixer.norm":                    {"output_hc_norm.weight", gguf.PlusOne},
		"mixer.down":                    {"output_hc_down.weight", gguf.Same},
		"mixer.up":                      {"output_hc_up.weight", gguf.Same},
		"layers.1.ple.table":            {"per_layer_token_embd.weight", gguf.Same},
		"layers.1.ple.key":              {"blk.1.ple_key.weight", gguf.Same},
		"layers.1.ple.norm_conv":        {"blk.1.ple_norm_conv.weight", gguf.PlusOne},
		"layers.1.ple.conv":             {"blk.1.ple_conv1d.weight", gguf.Same},
		"layers.0.attn_hc.norm":         {"blk.0.hc_attn_norm.weight", gguf.PlusOne},
		"layers.0.attn_hc.inject":       {"blk.0.hc_attn_inject.weight", gguf.Same},
		"layers.0.mlp_hc.down":          {"blk.0.hc_ffn_down.weight", gguf.Same},
		"layers.0.gdn.norm":             {"blk.0.ssm_norm.weight", gguf.Same}, // a plain gated norm: no +1
		"layers.3.attn.q":               {"blk.3.attn_q.weight", gguf.Same},
		"layers.3.attn.k_norm":          {"blk.3.attn_k_norm.weight", gguf.PlusOne},
		"layers.3.attn.index_q_norm":    {"blk.3.indexer.q_norm.weight", gguf.PlusOne},
		"layers.47.moe.experts.down":    {"blk.47.ffn_down_exps.weight", gguf.Same},
		"layers.47.moe.shared_gate":     {"blk.47.ffn_gate_inp_shexp.weight", gguf.Same},
		"mtp.fc_embedding":              {"blk.48.nextn.fc_embd.weight", gguf.Same},
		"mtp.pre_fc_norm_hidden":        {"blk.48.nextn.hnorm.weight", gguf.PlusOne},
		"mtp.mixer.norm":                {"blk.48.nextn.hc_head_norm.weight", gguf.PlusOne},
		"mtp.layers.0.attn.o":           {"blk.48.attn_output.weight", gguf.Same},
		"mtp.layers.0.mlp_hc.inject":    {"blk.48.hc_ffn_inject.weight", gguf.Same},
		"mtp.layers.0.moe.experts.gate": {"blk.48.ffn_gate_exps.weight", gguf.Same},
	} {
		m, err := Qwen4ExpRole(flashNext, role)
		if err != nil || m.Tensor != w.name || m.Transform != w.tr || m.Runs != nil || m.Cols != nil {
			t.Errorf("%s: %+v, %v; want %s (%s)", role, m, err, w.name, w.tr)
		}
	}
	for _, role := range []string{"layers.2.ple.table", "final_norm", "layers.0.attn_norm", "layers.0.gdn.qkvz", "mtp.fc", "layers.x.attn.q"} {
		if m, err := Qwen4ExpRole(flashNext, role); err == nil {
			t.Errorf("%s: %+v, want an error", role, m)
		}
	}
}

// The value-head order written by hand from llama.cpp's convention: GGUF
// head r·nk + k is HF head k·rep + r. With nk = 2, rep = 3, HF heads 0…5
// sit at GGUF positions 0, 2, 4, 1, 3, 5 (a third-party reader's test of the
// inverse, grouped from tiled = arange(6), expects exactly [0, 2, 4, 1, 3, 5]).
func TestQwen4ExpTiledHeads(t *testing.T) {
	var got []int
	for _, p := range tiled(2, 6) {
		got = append(got, p.gguf)
	}
	if want := []int{0, 2, 4, 1, 3, 5}; !slices.Equal(got, want) {
		t.Errorf("GGUF positions of HF heads 0…5: %v, want %v", got, want)
	}
	d := Qwen4ExpDims{Layers: 4, KeyHeads: 2, ValueHeads: 6, KeyHeadDim: 16, ValueHeadDim: 16}
	m, err := Qwen4ExpRole(d, "layers.0.gdn.out")
	if err != nil {
		t.Fatal(err)
	}
	want := []gguf.ColRun{colRun(0, 0, 16), colRun(32, 16, 16), colRun(64, 32, 16), colRun(16, 48, 16), colRun(48, 64, 16), colRun(80, 80, 16)}
	if m.Tensor != "blk.0.ssm_out.weight" || !reflect.DeepEqual(m.Cols, want) {
		t.Errorf("gdn.out: %+v, want ssm_out with columns %v", m, want)
	}
	// One value head per key head: nothing moves, and the runs say so.
	same := Qwen4ExpDims{Layers: 1, KeyHeads: 4, ValueHeads: 4, KeyHeadDim: 8, ValueHeadDim: 8}
	if m, _ := Qwen4ExpRole(same, "layers.0.gdn.out"); m.Cols != nil {
		t.Errorf("rep 1: gdn.out columns %v, want none", m.Cols)
	}
	if m, _ := Qwen4ExpRole(same, "layers.0.gdn.qkv"); !reflect.DeepEqual(m.Runs, []gguf.RowRun{rowRun("blk.0.attn_qkv.weight", 0, 0, 96)}) {
		t.Errorf("rep 1: gdn.qkv runs %v, want one", m.Runs)
	}
}

// The row runs of every reordered or split role cover the role and their
// tensors exactly once (Flash-Next's dims).
func TestQwen4ExpRunsCover(t *testing.T) {
	nk, nv, dk, dv := 16, 48, 128, 128
	for role, c := range map[string]struct {
		rows    int
		tensors map[string]int
	}{
		"layers.0.gdn.qkv":       {2*nk*dk + nv*dv, map[string]int{"blk.0.attn_qkv.weight": 2*nk*dk + nv*dv}},
		"layers.0.gdn.z":         {nv * dv, map[string]int{"blk.0.attn_gate.weight": nv * dv}},
		"layers.0.gdn.b":         {nv, map[string]int{"blk.0.ssm_beta.weight": nv}},
		"layers.0.gdn.a":         {nv, map[string]int{"blk.0.ssm_alpha.weight": nv}},
		"layers.0.gdn.conv":      {2*nk*dk + nv*dv, map[string]int{"blk.0.ssm_conv1d.weight": 2*nk*dk + nv*dv}},
		"layers.3.attn.index_qk": {640, map[string]int{"blk.3.indexer.q_proj.weight": 512, "blk.3.indexer.k_proj.weight": 128}},
	} {
		m, err := Qwen4ExpRole(flashNext, role)
		if err != nil || m.Tensor != "" {
			t.Fatalf("%s: %+v, %v", role, m, err)
		}
		roleRows := make([]int, c.rows)
		tensorRows := map[string][]int{}
		for n, r := range c.tensors {
			tensorRows[n] = make([]int, r)
		}
		for _, r := range m.Runs {
			tr, ok := tensorRows[r.Tensor]
			if !ok || r.TensorRow+r.Rows > len(tr) || r.RoleRow+r.Rows > c.rows {
				t.Fatalf("%s: run %+v outside the role or its tensors", role, r)
			}
			for i := 0; i < r.Rows; i++ {
				roleRows[r.RoleRow+i]++
				tr[r.TensorRow+i]++
			}
		}
		for n, tr := range tensorRows {
			if slices.ContainsFunc(tr, func(k int) bool { return k != 1 }) || slices.ContainsFunc(roleRows, func(k int) bool { return k != 1 }) {
				t.Errorf("%s: runs do not cover the role and %s exactly once", role, n)
			}
		}
	}
}
