package arch

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/format/gguf"
)

// The per-layer roles of models.Config.Tensors for qwen3_next (models/tensors.go),
// by layer kind.
var (
	rolesCommon = []string{"attn_norm", "ffn_norm", "moe.router", "moe.experts.gate", "moe.experts.up",
		"moe.experts.down", "moe.shared.gate", "moe.shared.up", "moe.shared.down", "moe.shared_gate"}
	rolesGDN  = []string{"gdn.qkvz", "gdn.ba", "gdn.conv", "gdn.a_log", "gdn.dt_bias", "gdn.norm", "gdn.out"}
	rolesAttn = []string{"attn.q", "attn.k", "attn.v", "attn.o", "attn.q_norm", "attn.k_norm"}
)

// real80B are the dims of Qwen3-Next-80B-A3B (qwen3_next.md §1).
var real80B = QwenNextDims{KeyHeads: 16, ValueHeads: 32, KeyHeadDim: 128, ValueHeadDim: 128,
	Heads: 16, KVHeads: 2, HeadDim: 256, OutputGate: true, ExpertFFN: 512}

func TestQwenNextNames(t *testing.T) {
	want := map[string]struct {
		name string
		tr   gguf.Transform
	}{
		"embed":                       {"token_embd.weight", gguf.Same},
		"head":                        {"output.weight", gguf.Same},
		"final_norm":                  {"output_norm.weight", gguf.PlusOne},
		"layers.0.attn_norm":          {"blk.0.attn_norm.weight", gguf.PlusOne},
		"layers.0.ffn_norm":           {"blk.0.post_attention_norm.weight", gguf.PlusOne},
		"layers.0.gdn.ba":             {"blk.0.ssm_ba.weight", gguf.Same},
		"layers.0.gdn.conv":           {"blk.0.ssm_conv1d.weight", gguf.Same},
		"layers.0.gdn.a_log":          {"blk.0.ssm_a", gguf.NegExp},
		"layers.0.gdn.dt_bias":        {"blk.0.ssm_dt.bias", gguf.Same},
		"layers.0.gdn.norm":           {"blk.0.ssm_norm.weight", gguf.Same}, // no +1: a plain gated norm
		"layers.0.gdn.out":            {"blk.0.ssm_out.weight", gguf.Same},
		"layers.3.attn.q":             {"blk.3.attn_q.weight", gguf.Same},
		"layers.3.attn.k":             {"blk.3.attn_k.weight", gguf.Same},
		"layers.3.attn.v":             {"blk.3.attn_v.weight", gguf.Same},
		"layers.3.attn.o":             {"blk.3.attn_output.weight", gguf.Same},
		"layers.3.attn.q_norm":        {"blk.3.attn_q_norm.weight", gguf.PlusOne},
		"layers.3.attn.k_norm":        {"blk.3.attn_k_norm.weight", gguf.PlusOne},
		"layers.47.moe.router":        {"blk.47.ffn_gate_inp.weight", gguf.Same},
		"layers.47.moe.experts.gate":  {"blk.47.ffn_gate_exps.weight", gguf.Same},
		"layers.47.moe.experts.up":    {"blk.47.ffn_up_exps.weight", gguf.Same},
		"layers.47.moe.experts.down":  {"blk.47.ffn_down_exps.weight", gguf.Same},
		"layers.47.moe.shared.gate":   {"blk.47.ffn_gate_shexp.weight", gguf.Same},
		"layers.47.moe.shared.up":     {"blk.47.ffn_up_shexp.weight", gguf.Same},
		"layers.47.moe.shared.down":   {"blk.47.ffn_down_shexp.weight", gguf.Same},
		"layers.47.moe.shared_gate":   {"blk.47.ffn_gate_inp_shexp.weight", gguf.Same},
		"layers.10.gdn.qkvz (legacy)": {"blk.10.ssm_in.weight", gguf.Same},
	}
	for role, w := range want {
		form := QwenNextForm{}
		r := role
		if strings.HasSuffix(role, " (legacy)") {
			form.LegacySSMIn, r = true, strings.TrimSuffix(role, " (legacy)")
		}
		m, err := QwenNextRole(real80B, form, r)
		if err != nil {
			t.Errorf("%s: %v", role, err)
			continue
		}
		if m.Tensor != w.name || m.Transform != w.tr || m.Runs != nil {
			t.Errorf("%s → %q %v (runs %v), want %q %v", role, m.Tensor, m.Transform, m.Runs, w.name, w.tr)
		}
		if back, tr, ok := QwenNextRoleOf(m.Tensor); !ok || back != r || tr != w.tr {
			t.Errorf("QwenNextRoleOf(%s) = %q %v %v, want %s", m.Tensor, back, tr, ok, r)
		}
	}
	// Every role the model lists maps under every form.
	for _, form := range []QwenNextForm{{}, {LegacySSMIn: true, FusedGateUp: true, FusedAttnQKV: true}} {
		for _, l := range []struct {
			layer int
			roles []string
		}{{0, append(rolesGDN, rolesCommon...)}, {3, append(rolesAttn, rolesCommon...)}} {
			for _, sub := range l.roles {
				role := fmt.Sprintf("layers.%d.%s", l.layer, sub)
				if m, err := QwenNextRole(real80B, form, role); err != nil || (m.Tensor == "") == (m.Runs == nil) {
					t.Errorf("form %+v, role %s: %+v, %v", form, role, m, err)
				}
			}
		}
	}
	for _, bad := range []string{"layers.x.attn_norm", "layers.-1.attn_norm", "layers.01.attn_norm", "layers.0.nope", "nope", "layers.0"} {
		if _, err := QwenNextRole(real80B, QwenNextForm{}, bad); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("role %q: err = %v", bad, err)
		}
	}
	for _, bad := range []string{"blk.01.attn_norm.weight", "blk.0.attn_qkv.weight", "blk.x.ssm_a", "token_embd", "blk.0"} {
		if r, _, ok := QwenNextRoleOf(bad); ok {
			t.Errorf("QwenNextRoleOf(%q) = %q", bad, r)
		}
	}
	if r, _, ok := QwenNextRoleOf("blk.5.ssm_in.weight"); !ok || r != "layers.5.gdn.qkvz" {
		t.Errorf("ssm_in maps to %q", r)
	}
}

// gather applies a role map's runs to labelled source rows.
func gather(t *testing.T, m gguf.RoleMap, src map[string][]string, roleRows int) []string {
	t.Helper()
	out := make([]string, roleRows)
	for _, r := range m.Runs {
		s := src[r.Tensor]
		if r.TensorRow < 0 || r.TensorRow+r.Rows > len(s) || r.RoleRow < 0 || r.RoleRow+r.Rows > roleRows {
			t.Fatalf("run %+v out of range (tensor %d rows, role %d)", r, len(s), roleRows)
		}
		for i := 0; i < r.Rows; i++ {
			if out[r.RoleRow+i] != "" {
				t.Fatalf("role row %d written twice", r.RoleRow+i)
			}
			out[r.RoleRow+i] = s[r.TensorRow+i]
		}
	}
	for i, v := range out {
		if v == "" {
			t.Fatalf("role row %d not covered", i)
		}
	}
	return out
}

func labels(prefix string, head, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d.%d", prefix, head, i)
	}
	return out
}

// TestQwenNextQKVZRegroup rebuilds HF's grouped in_proj_qkvz from the split
// attn_qkv + attn_gate, both built here from the layout descriptions of
// qwen3_next.md §5.1 and §8 (rows labelled by what they hold).
func TestQwenNextQKVZRegroup(t *testing.T) {
	for _, d := range []QwenNextDims{
		{KeyHeads: 2, ValueHeads: 4, KeyHeadDim: 3, ValueHeadDim: 2},
		{KeyHeads: 2, ValueHeads: 6, KeyHeadDim: 2, ValueHeadDim: 3}, // 3 value heads per key head (q4-a's ratio)
		real80B,
	} {
		nk, nv, dk, dv := d.KeyHeads, d.ValueHeads, d.KeyHeadDim, d.ValueHeadDim
		r := nv / nk
		var grouped, qkv, gate []string // HF grouped order; llama.cpp's flat q|k|v, and z
		for g := 0; g < nk; g++ {
			grouped = append(grouped, labels("q", g, dk)...)
			grouped = append(grouped, labels("k", g, dk)...)
			for h := g * r; h < (g+1)*r; h++ {
				grouped = append(grouped, labels("v", h, dv)...)
			}
			for h := g * r; h < (g+1)*r; h++ {
				grouped = append(grouped, labels("z", h, dv)...)
			}
		}
		for g := 0; g < nk; g++ {
			qkv = append(qkv, labels("q", g, dk)...)
		}
		for g := 0; g < nk; g++ {
			qkv = append(qkv, labels("k", g, dk)...)
		}
		for h := 0; h < nv; h++ {
			qkv = append(qkv, labels("v", h, dv)...)
			gate = append(gate, labels("z", h, dv)...)
		}
		m, err := QwenNextRole(d, QwenNextForm{}, "layers.4.gdn.qkvz")
		if err != nil {
			t.Fatal(err)
		}
		got := gather(t, m, map[string][]string{"blk.4.attn_qkv.weight": qkv, "blk.4.attn_gate.weight": gate}, len(grouped))
		if !reflect.DeepEqual(got, grouped) {
			t.Errorf("dims %+v: regrouped rows\n%v\nwant\n%v", d, got[:min(40, len(got))], grouped[:min(40, len(grouped))])
		}
	}
	if _, err := QwenNextRole(QwenNextDims{KeyHeads: 3, ValueHeads: 4, KeyHeadDim: 1, ValueHeadDim: 1}, QwenNextForm{}, "layers.0.gdn.qkvz"); err == nil {
		t.Error("value heads not a multiple of key heads accepted")
	}
}

func TestQwenNextFusedForms(t *testing.T) {
	d := QwenNextDims{Heads: 2, KVHeads: 1, HeadDim: 2, OutputGate: true, ExpertFFN: 3}
	// attn_qkv on a full-attention layer: q with its gate (2 heads × 2 × 2), k, v.
	qkv := append(append(labels("q", 0, 8), labels("k", 0, 2)...), labels("v", 0, 2)...)
	for sub, want := range map[string][]string{"attn.q": labels("q", 0, 8), "attn.k": labels("k", 0, 2), "attn.v": labels("v", 0, 2)} {
		m, err := QwenNextRole(d, QwenNextForm{FusedAttnQKV: true}, "layers.3."+sub)
		if err != nil {
			t.Fatal(err)
		}
		if got := gather(t, m, map[string][]string{"blk.3.attn_qkv.weight": qkv}, len(want)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", sub, got, want)
		}
	}
	// ffn_gate_up_exps: per expert, gate rows then up rows.
	gu := append(labels("gate", 0, 3), labels("up", 0, 3)...)
	for sub, want := range map[string][]string{"moe.experts.gate": labels("gate", 0, 3), "moe.experts.up": labels("up", 0, 3)} {
		m, err := QwenNextRole(d, QwenNextForm{FusedGateUp: true}, "layers.1."+sub)
		if err != nil {
			t.Fatal(err)
		}
		if got := gather(t, m, map[string][]string{"blk.1.ffn_gate_up_exps.weight": gu}, 3); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", sub, got, want)
		}
	}
	if m, _ := QwenNextRole(d, QwenNextForm{FusedGateUp: true}, "layers.1.moe.experts.down"); m.Tensor != "blk.1.ffn_down_exps.weight" {
		t.Errorf("down under fused gate_up: %+v", m)
	}
}

func TestDetectQwenNextForm(t *testing.T) {
	set := func(names ...string) func(string) bool {
		return func(n string) bool {
			for _, x := range names {
				if x == n {
					return true
				}
			}
			return false
		}
	}
	cases := []struct {
		has  func(string) bool
		want QwenNextForm
	}{
		{set("blk.0.attn_qkv.weight", "blk.0.attn_gate.weight", "blk.3.attn_q.weight"), QwenNextForm{}},
		{set("blk.0.ssm_in.weight", "blk.3.attn_q.weight"), QwenNextForm{LegacySSMIn: true}},
		{set("blk.0.attn_qkv.weight", "blk.0.ffn_gate_up_exps.weight", "blk.3.attn_qkv.weight"), QwenNextForm{FusedGateUp: true, FusedAttnQKV: true}},
	}
	for i, c := range cases {
		if got := DetectQwenNextForm(c.has, 0, 3); got != c.want {
			t.Errorf("case %d: %+v, want %+v", i, got, c.want)
		}
	}
}
