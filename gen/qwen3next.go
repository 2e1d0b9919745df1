package gen

import (
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

// The Qwen3-Next window (runtime/arch/qwen3next.go is its file side):
// pre-norm layers with plain residual adds; the MTP head concatenates the
// normed embedding and hidden row before its fc.
var qwen3Next = family{layer: (*builder).qwen3Layer, mtpInput: (*builder).qwen3MTPInput, mtpKind: models.LayerFullAttention}

// qwen3Layer: pre-norm mixer and MoE, each with a plain residual add.
func (b *builder) qwen3Layer(ly layerSpec, params graph.Binding, x graph.Range) {
	H := b.a.HiddenSize
	l := ly.n
	xn := b.rowsScratch("xn", H)
	b.rmsnorm(l, params, x, ly.t("attn_norm"), xn, H, H)
	mix := b.rowsScratch("mix", H)
	b.mixer(ly, params, xn, mix)
	b.emit(string(graph.FamilyResidualAdd), graph.FamilyResidualAdd, l, cs(graph.ConstRows, b.T, graph.ConstDim, H), nil, [3]int{b.T, slabs(H), 1}, rowGroup(H),
		params, inout("x", x), in("y", mix))
	b.rmsnorm(l, params, x, ly.t("ffn_norm"), xn, H, H)
	b.moe(ly, params, xn, x, true)
}

// qwen3MTPInput: x = fc([norm(e) ‖ norm(h)]).
func (b *builder) qwen3MTPInput(params graph.Binding, en, hn, x graph.Range) {
	H := b.a.HiddenSize
	cat := b.rowsScratch("mtp_cat", 2*H)
	b.emit(string(graph.FamilyConcat), graph.FamilyConcat, -1, cs(graph.ConstRows, b.T, graph.ConstA, H, graph.ConstB, H), nil, [3]int{b.T, 1, 1}, rowGroup(2*H),
		params, in("x", en), in("y", hn), out("z", cat))
	b.matmul(-1, params, "mtp.fc", cat, x)
}
