package gen

import (
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

// The Qwen3.8-Flash-Next window (runtime/arch/qwen4exp.go is its file
// side): hyper-connection streams read and injected by gated residuals, the
// PLE layer, the QSA indexer; the MTP head projects embedding and hidden
// streams apart and adds them.
var qwen4Exp = family{layer: (*builder).qwen4Layer, mtpInput: (*builder).qwen4MTPInput, mtpKind: models.LayerSparseAttention}

// qwen4Layer: PLE (on its layers), then the mixer and the MoE, each read from
// and injected into the hyper-connection streams by a gated residual.
func (b *builder) qwen4Layer(ly layerSpec, params graph.Binding, x graph.Range) {
	H := b.a.HiddenSize
	l := ly.n
	if _, ok := b.pleRows[l]; ok {
		b.ple(ly, params, x)
	}
	mix := b.rowsScratch("mix", H)
	yin, c := b.hcRead(l, ly.t("attn_hc."), params, x, b.T, true)
	b.mixer(ly, params, yin, mix)
	b.hcInject(l, params, x, mix, c)
	yin, c = b.hcRead(l, ly.t("mlp_hc."), params, x, b.T, true)
	b.moe(ly, params, yin, mix, false)
	b.hcInject(l, params, x, mix, c)
}

// qwen4MTPInput: x_s = fc_hidden(norm(h)_s) + fc_embedding(norm(e)) for
// every stream s.
func (b *builder) qwen4MTPInput(params graph.Binding, en, hn, x graph.Range) {
	H := b.a.HiddenSize
	streams := max(b.a.HyperConnections.Count, 1)
	ep := b.rowsScratch("mtp_ep", H)
	b.matmul(-1, params, "mtp.fc_embedding", en, ep)
	// fc_hidden applies to each stream: every row holds `streams` sub-rows.
	t := b.w.tensor("mtp.fc_hidden")
	b.emit(graph.FamilyMatmul.Kernel(t.Format), graph.FamilyMatmul, -1, cs(graph.ConstRows, b.T, graph.ConstN, H, graph.ConstK, H, graph.ConstFold, streams, graph.ConstWFmt, formatCode(t)), nil,
		matmulGrid(H, H, b.T, streams), matmulThreadgroup,
		params, in("w", b.w.whole("mtp.fc_hidden")), in("x", hn), out("y", x))
	b.emit(string(graph.FamilyStreamAdd), graph.FamilyStreamAdd, -1, cs(graph.ConstRows, b.T, graph.ConstHidden, H, graph.ConstStreams, streams), nil, [3]int{b.T, streams, slabs(H)}, rowGroup(H),
		params, inout("x", x), in("y", ep))
}

// hcRead emits a gated-residual read of the hyper-connection streams x: the
// per-stream norm, the low-rank gate, and the gated mean that is the block
// input. With inject it also emits the per-stream inject logits.
func (b *builder) hcRead(layer int, prefix string, params graph.Binding, x graph.Range, rows int, inject bool) (yin, c graph.Range) {
	a := b.a
	H, C, R := a.HiddenSize, a.HyperConnections.Count, a.HyperConnections.LowRank
	S := C * H
	xn := b.rowsScratch("hc_xn", S)
	b.rmsnormRows(layer, params, x, prefix+"norm", xn, S, H, rows)
	aPre := b.rowsScratch("hc_a_pre", R)
	b.matmulRows(layer, params, prefix+"down", xn, aPre, rows)
	if inject {
		c = b.rowsScratch("hc_c", C)
		b.matmulRows(layer, params, prefix+"inject", xn, c, rows)
	}
	act := b.rowsScratch("hc_a", R)
	b.emit(string(graph.FamilyHCAct), graph.FamilyHCAct, layer, cs(graph.ConstRows, rows, graph.ConstDim, R, graph.ConstStreams, C), nil, [3]int{rows, slabs(R), 1}, rowGroup(R),
		params, in("x", aPre), out("y", act))
	g := b.rowsScratch("hc_g", S)
	b.matmulRows(layer, params, prefix+"up", act, g, rows)
	yin = b.rowsScratch("y_in", H)
	b.emit(string(graph.FamilyHCMix), graph.FamilyHCMix, layer, cs(graph.ConstRows, rows, graph.ConstHidden, H, graph.ConstStreams, C), nil, [3]int{rows, slabs(H), 1}, rowGroup(H),
		params, in("xn", xn), in("g", g), out("y", yin))
	return yin, c
}

// hcInject emits x_s += 2·sigmoid(c_s / streams) · y for every stream s.
func (b *builder) hcInject(layer int, params graph.Binding, x, y, c graph.Range) {
	H, C := b.a.HiddenSize, b.a.HyperConnections.Count
	b.emit(string(graph.FamilyHCInject), graph.FamilyHCInject, layer, cs(graph.ConstRows, b.T, graph.ConstHidden, H, graph.ConstStreams, C), nil, [3]int{b.T, C, slabs(H)}, rowGroup(H),
		params, inout("x", x), in("y", y), in("c", c))
}

// ple emits a PLE layer: the gathered n-gram embedding ε (from params) gives
// per-stream keys and a value; each stream's key/query agreement gates the
// value (signed sqrt, sigmoid); a dilated causal conv of the normalised gated
// value is added with it to the streams.
func (b *builder) ple(ly layerSpec, params graph.Binding, x graph.Range) {
	a := b.a
	H, C := a.HiddenSize, a.HyperConnections.Count
	S := C * H
	l, lt := ly.n, ly.t
	eps := in("ple_rows", b.pleRows[l]) // the host's gather
	kPre := b.rowsScratch("ple_kpre", S)
	b.matmul(l, params, lt("ple.key"), eps.Range, kPre)
	v := b.rowsScratch("ple_v", H)
	b.matmul(l, params, lt("ple.value"), eps.Range, v)
	k := b.rowsScratch("ple_k", S)
	b.rmsnorm(l, params, kPre, lt("ple.norm_key"), k, S, H)
	q := b.rowsScratch("ple_q", S)
	b.rmsnorm(l, params, x, lt("ple.norm_query"), q, S, H)
	z := b.rowsScratch("ple_z", S)
	b.emit(string(graph.FamilyPLEGate), graph.FamilyPLEGate, l, cs(graph.ConstRows, b.T, graph.ConstHidden, H, graph.ConstStreams, C), nil, [3]int{b.T, C, 1}, rowGroup(H),
		params, in("k", k), in("q", q), in("v", v), out("z", z))
	zn := b.rowsScratch("ple_zn", S)
	b.rmsnorm(l, params, z, lt("ple.norm_conv"), zn, S, H)
	K, d := a.PLE.ConvKernel, a.PLE.NgramSize
	state := b.state.alloc(int64((K - 1) * d * S * f32))
	b.emit(string(graph.FamilyPLEConv), graph.FamilyPLEConv, l, cs(graph.ConstRows, b.T, graph.ConstDim, S, graph.ConstKernel, K, graph.ConstDilation, d), nil,
		[3]int{ceilDiv(S, channelThreads), 1, 1}, [3]int{channelThreads, 1, 1},
		params, in("z", z), in("zn", zn), in("w", b.w.whole(lt("ple.conv"))), inout("state", state), inout("x", x))
}

// indexer emits QSA block selection: the indexer queries, the raw-key cache,
// pooled keys of blocks completed in this window (kept in the cache, never
// recomputed), and the per-row top-k blocks. It returns the bindings the
// attention kernel reads the selection from.
func (b *builder) indexer(ly layerSpec, params graph.Binding, xn graph.Range) []graph.Binding {
	a := b.a
	ix, at := a.Indexer, a.Attention
	l, lt := ly.n, ly.t
	ctx := b.c.Runtime.ContextLength
	qk := b.rowsScratch("idx_qk", (ix.Heads+ix.KVHeads)*ix.HeadDim)
	b.matmul(l, params, lt("attn.index_qk"), xn, qk)
	raw := b.kv.alloc(int64(ctx * ix.HeadDim * f32))
	pooled := b.kv.alloc(int64(ceilDiv(ctx, ix.CompressRatio) * ix.HeadDim * f32))
	consts := func() []graph.Const {
		return cs(graph.ConstRows, b.T, graph.ConstHeads, ix.Heads, graph.ConstHeadDim, ix.HeadDim, graph.ConstRotDim, at.RotaryDim(), graph.ConstRatio, ix.CompressRatio,
			graph.ConstTopK, ix.BlockTopK(), graph.ConstCtx, ctx)
	}
	rope := []graph.Scalar{{Name: "eps", Value: a.RMSNormEps}, {Name: "rope_theta", Value: at.RopeTheta}}
	q := b.rowsScratch("idx_q", ix.Heads*ix.HeadDim)
	b.emit(string(graph.FamilyIndexPrep), graph.FamilyIndexPrep, l, consts(), rope, [3]int{b.T, ix.Heads + 1, 1}, rowGroup(ix.HeadDim),
		params, in("qk", qk), in("q_norm", b.w.whole(lt("attn.index_q_norm"))), out("q", q), inout("raw", raw))
	b.emit(string(graph.FamilyIndexPool), graph.FamilyIndexPool, l, consts(), rope, [3]int{ceilDiv(b.T, ix.CompressRatio) + 1, 1, 1}, rowGroup(ix.HeadDim),
		params, in("raw", raw), in("k_norm", b.w.whole(lt("attn.index_k_norm"))), inout("pooled", pooled))
	sel := b.rowsScratch("idx_sel", max(ix.BlockTopK(), 1))
	cnt := b.rowsScratch("idx_count", 1)
	b.emit(string(graph.FamilyIndexSelect), graph.FamilyIndexSelect, l, consts(), nil, [3]int{b.T, 1, 1}, [3]int{selectThreads, 1, 1},
		params, in("q", q), in("pooled", pooled), out("sel", sel), out("count", cnt))
	return []graph.Binding{in("sel", sel), in("count", cnt)}
}
