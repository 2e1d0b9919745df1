package arch

import (
	"reflect"
	"testing"

	"github.com/strata-llm/strata/runtime/format/gguf"
)

// The split GDN projections (models.LinearAttention.SplitProjections) read
// attn_qkv and attn_gate whole, and b and a from ssm_ba, whose rows are HF's
// in_proj_ba order: per key head g, the b of its value heads, then their a.
// With 2 key heads and 4 value heads (2 per key head): ssm_ba rows
// b0 b1 a0 a1 b2 b3 a2 a3.
func TestQwenNextSplitRoles(t *testing.T) {
	d := QwenNextDims{KeyHeads: 2, ValueHeads: 4, KeyHeadDim: 8, ValueHeadDim: 8}
	for role, want := range map[string]gguf.RoleMap{
		"layers.1.gdn.qkv": {Role: "layers.1.gdn.qkv", Tensor: "blk.1.attn_qkv.weight"},
		"layers.1.gdn.z":   {Role: "layers.1.gdn.z", Tensor: "blk.1.attn_gate.weight"},
		"layers.1.gdn.b": {Role: "layers.1.gdn.b", Runs: []gguf.RowRun{
			rowRun("blk.1.ssm_ba.weight", 0, 0, 2), rowRun("blk.1.ssm_ba.weight", 4, 2, 2)}},
		"layers.1.gdn.a": {Role: "layers.1.gdn.a", Runs: []gguf.RowRun{
			rowRun("blk.1.ssm_ba.weight", 2, 0, 2), rowRun("blk.1.ssm_ba.weight", 6, 2, 2)}},
	} {
		got, err := QwenNextRole(d, QwenNextForm{}, role)
		if err != nil {
			t.Fatalf("%s: %v", role, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", role, got, want)
		}
	}
	// A legacy file (grouped ssm_in) has no flat q|k|v tensor to read.
	if _, err := QwenNextRole(d, QwenNextForm{LegacySSMIn: true}, "layers.1.gdn.qkv"); err == nil {
		t.Error("legacy ssm_in file: gdn.qkv resolved, want an error")
	}
	if _, err := QwenNextRole(QwenNextDims{KeyHeads: 3, ValueHeads: 4}, QwenNextForm{}, "layers.1.gdn.b"); err == nil {
		t.Error("4 value heads over 3 key heads: gdn.b resolved, want an error")
	}
}
