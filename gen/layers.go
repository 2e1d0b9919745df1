package gen

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

// build emits the whole window: embedding, every layer, the final norm (or
// mixer) and the head.
func (b *builder) build(opt Options) {
	a := b.a
	H := a.HiddenSize
	params := b.header()
	// The host writes each PLE layer's gathered n-gram rows into params too.
	b.pleRows = map[int]graph.Range{}
	for l := 0; l < a.NumLayers; l++ {
		if a.PLE.Ordinal(l) >= 0 {
			r := b.params.alloc(int64(b.T * a.PLE.EmbedDim * f32))
			b.pleRows[l] = r
			b.paramList = append(b.paramList, graph.Param{Name: graph.ParamPLE(l), Offset: r.Offset, Count: b.T * a.PLE.EmbedDim})
		}
	}

	streams := max(a.HyperConnections.Count, 1)
	W := streams * H // residual width: hyper-connection streams side by side
	x := b.rowsScratch("x", W)
	embed := b.w.tensor("embed")
	b.emit(graph.FamilyEmbed.Kernel(embed.Format), graph.FamilyEmbed, -1, cs(graph.ConstRows, b.T, graph.ConstDim, H, graph.ConstVocab, a.VocabSize, graph.ConstCopies, streams, graph.ConstWFmt, formatCode(embed)), nil,
		[3]int{b.T, 1, 1}, rowGroup(H), params, in("table", b.w.whole("embed")), out("x", x))

	for l := 0; l < a.NumLayers; l++ {
		b.family().layer(b, trunkLayer(a, l), params, x)
	}

	if a.MTP.NumLayers > 0 {
		// Leave the final hidden rows (pre final norm or mixer) for the MTP head.
		hidden := b.carry.alloc(int64(b.T * W * f32))
		b.emit(string(graph.FamilyCopyRows), graph.FamilyCopyRows, -1, cs(graph.ConstRows, b.T, graph.ConstDim, W), nil, [3]int{b.T, 1, 1}, rowGroup(W),
			params, in("x", x), out("y", hidden))
	}

	fin := x
	b.logitRows = b.T
	if opt.LastRowLogits {
		b.logitRows = 1
		fin = b.scratch("x_last", 1, W)
		b.emit(string(graph.FamilyCopyLastRow), graph.FamilyCopyLastRow, -1, cs(graph.ConstRows, b.T, graph.ConstDim, W), nil, [3]int{1, 1, 1}, rowGroup(W),
			params, in("x", x), out("y", fin))
	}
	var fn graph.Range
	if a.HyperConnections.Count > 0 {
		fn, _ = b.hcRead(-1, "mixer.", params, fin, b.logitRows, false)
	} else {
		fn = b.scratch("final_normed", b.logitRows, H)
		b.rmsnormRows(-1, params, fin, "final_norm", fn, H, H, b.logitRows)
	}
	b.logits = b.scratch("logits", b.logitRows, a.VocabSize)
	b.matmulRows(-1, params, "head", fn, b.logits, b.logitRows)
	// Greedy's choice and a finiteness flag per logits row: greedy decoding
	// reads back two words a row instead of the vocabulary's logits.
	b.best = b.scratch("best", b.logitRows, 2)
	b.emit(string(graph.FamilyArgmax), graph.FamilyArgmax, -1, cs(graph.ConstRows, b.logitRows, graph.ConstDim, a.VocabSize), nil,
		[3]int{b.logitRows, 1, 1}, [3]int{argmaxThreads, 1, 1}, params, in("logits", b.logits), out("best", b.best))
}

// header emits the params fields every window has and returns the binding
// of the header.
func (b *builder) header() graph.Binding {
	b.paramList = []graph.Param{
		{Name: graph.ParamRows, Offset: 4 * graph.ParamRowsWord, Count: 1},
		{Name: graph.ParamPos, Offset: 4 * graph.ParamPosWord, Count: 1},
		{Name: graph.ParamTokens, Offset: 4 * graph.ParamTokensWord, Count: b.T},
	}
	return in(graph.ParamsBuffer, b.params.alloc(graph.ParamsBytes(b.T)))
}

// buildMTP emits the MTP draft head over T rows: row t combines the trunk's
// hidden row t (left in mtp_hidden) with the embedding of token t (the token
// after it), runs the MTP decoder layer (with its own caches) and the shared
// head. The math is vLLM's (qwen3_next.md §7, qwen4_exp.md §5); no HF
// reference exists for it.
func (b *builder) buildMTP() {
	a := b.a
	H := a.HiddenSize
	params := b.header()
	streams := max(a.HyperConnections.Count, 1)
	W := streams * H
	hidden := b.carry.alloc(int64(b.T * W * f32))
	embed := b.w.tensor("embed")
	e := b.rowsScratch("mtp_e", H)
	b.emit(graph.FamilyEmbed.Kernel(embed.Format), graph.FamilyEmbed, -1, cs(graph.ConstRows, b.T, graph.ConstDim, H, graph.ConstVocab, a.VocabSize, graph.ConstCopies, 1, graph.ConstWFmt, formatCode(embed)), nil,
		[3]int{b.T, 1, 1}, rowGroup(H), params, in("table", b.w.whole("embed")), out("x", e))
	en := b.rowsScratch("mtp_en", H)
	b.rmsnorm(-1, params, e, "mtp.pre_fc_norm_embedding", en, H, H)
	// The hidden norm takes its statistics over all streams at once.
	hn := b.rowsScratch("mtp_hn", W)
	b.rmsnorm(-1, params, hidden, "mtp.pre_fc_norm_hidden", hn, W, W)
	x := b.rowsScratch("x", W)
	fam := b.family()
	fam.mtpInput(b, params, en, hn, x)
	for i := 0; i < a.MTP.NumLayers; i++ {
		fam.layer(b, layerSpec{n: a.NumLayers + i, prefix: models.MTPLayerPrefix(i), kind: fam.mtpKind}, params, x)
	}
	// A chained draft step feeds the head its own last hidden row.
	b.emit(string(graph.FamilyCopyLastRow), graph.FamilyCopyLastRow, -1, cs(graph.ConstRows, b.T, graph.ConstDim, W), nil, [3]int{1, 1, 1}, rowGroup(W),
		params, in("x", x), out("y", graph.Range{Buffer: hidden.Buffer, Offset: hidden.Offset, Size: int64(W * f32)}))
	b.logitRows = b.T
	var fn graph.Range
	if a.HyperConnections.Count > 0 {
		fn, _ = b.hcRead(-1, "mtp.mixer.", params, x, b.T, false)
	} else {
		fn = b.rowsScratch("final_normed", H)
		b.rmsnorm(-1, params, x, "mtp.norm", fn, H, H)
	}
	b.logits = b.rowsScratch("logits", a.VocabSize)
	b.matmul(-1, params, "head", fn, b.logits)
}

// layerSpec is one decoder layer being emitted: its number in the dispatches
// (trunk layers 0…L−1, MTP layers after them), the prefix of its weight
// roles, and its kind.
type layerSpec struct {
	n      int
	prefix string
	kind   string
}

func trunkLayer(a *models.Architecture, l int) layerSpec {
	return layerSpec{n: l, prefix: fmt.Sprintf("layers.%d.", l), kind: a.LayerTypes[l]}
}

// t names one of the layer's weight roles.
func (ly layerSpec) t(role string) string { return ly.prefix + role }

// family is what the window of one architecture (gen/<arch>.go) adds to
// the shared pieces here.
type family struct {
	// layer emits one decoder layer (trunk or MTP) on the residual x.
	layer func(b *builder, ly layerSpec, params graph.Binding, x graph.Range)
	// mtpInput combines the MTP head's normed embedding en and normed trunk
	// hidden rows hn into its residual x.
	mtpInput func(b *builder, params graph.Binding, en, hn, x graph.Range)
	// mtpKind is the attention kind of the MTP decoder layer.
	mtpKind string
}

// families are the architectures the generator builds windows for, by
// model type.
var families = map[string]family{models.TypeQwen3Next: qwen3Next, models.TypeQwen4Exp: qwen4Exp}

// family is the model's architecture (models.Validate admits only these).
func (b *builder) family() family { return families[b.a.ModelType] }

func (b *builder) mixer(ly layerSpec, params graph.Binding, in, out graph.Range) {
	if ly.kind == models.LayerLinearAttention {
		b.gatedDeltaNet(ly, params, in, out)
	} else {
		b.attention(ly, params, in, out)
	}
}

func (b *builder) rmsnorm(layer int, params graph.Binding, x graph.Range, weight string, y graph.Range, dim, group int) {
	b.rmsnormRows(layer, params, x, weight, y, dim, group, b.T)
}

// rmsnormRows emits the zero-centred norm y = x·rsqrt(mean(x²)+eps)·(1+w),
// with statistics per group of values (group = dim: one group).
func (b *builder) rmsnormRows(layer int, params graph.Binding, x graph.Range, weight string, y graph.Range, dim, group, rows int) {
	b.emit(string(graph.FamilyRMSNorm), graph.FamilyRMSNorm, layer, cs(graph.ConstRows, rows, graph.ConstDim, dim, graph.ConstGroup, group, graph.ConstZeroCentred, true),
		[]graph.Scalar{{Name: "eps", Value: b.a.RMSNormEps}}, [3]int{rows, dim / group, 1}, rowGroup(group),
		params, in("x", x), in("w", b.w.whole(weight)), out("y", y))
}

// matmul emits y[t] = W x[t] for the live rows: W is [n, k] in its format.
func (b *builder) matmul(layer int, params graph.Binding, weight string, x, y graph.Range) {
	b.matmulRows(layer, params, weight, x, y, b.T)
}

func (b *builder) matmulRows(layer int, params graph.Binding, weight string, x, y graph.Range, rows int) {
	t := b.w.tensor(weight)
	n, k := t.Shape[0], t.Shape[1]
	b.emit(graph.FamilyMatmul.Kernel(t.Format), graph.FamilyMatmul, layer, cs(graph.ConstRows, rows, graph.ConstN, n, graph.ConstK, k, graph.ConstWFmt, formatCode(t)), nil,
		matmulGrid(n, k, rows, 1), matmulThreadgroup,
		params, in("w", b.w.whole(weight)), in("x", x), out("y", y))
}

func (b *builder) gatedDeltaNet(ly layerSpec, params graph.Binding, xn, mix graph.Range) {
	g := b.a.LinearAttention
	l, lt := ly.n, ly.t
	grouped := b.a.GroupedGDN() // HF's Qwen3-Next interleaves q|k|v|z and b|a per key head
	dims := func(extra ...any) []graph.Const {
		return cs(append([]any{graph.ConstRows, b.T, graph.ConstNK, g.NumKeyHeads, graph.ConstNV, g.NumValueHeads, graph.ConstDK, g.KeyHeadDim, graph.ConstDV, g.ValueHeadDim, graph.ConstGrouped, grouped}, extra...)...)
	}
	// qkv: the conv's input; z: the output gate; b, a: the gates.
	var qkv, z, beta, alpha graph.Binding
	if grouped {
		qkvz := b.rowsScratch("gdn_qkvz", 2*g.KeyDim()+2*g.ValueDim())
		ba := b.rowsScratch("gdn_ba", 2*g.NumValueHeads)
		b.matmul(l, params, lt("gdn.qkvz"), xn, qkvz)
		b.matmul(l, params, lt("gdn.ba"), xn, ba)
		qkv, z, beta, alpha = in("qkvz", qkvz), in("qkvz", qkvz), in("ba", ba), in("ba", ba)
	} else {
		r := map[string]graph.Range{
			"qkv": b.rowsScratch("gdn_qkv", g.ConvDim()), "z": b.rowsScratch("gdn_z", g.ValueDim()),
			"b": b.rowsScratch("gdn_b", g.NumValueHeads), "a": b.rowsScratch("gdn_a", g.NumValueHeads),
		}
		for _, name := range []string{"qkv", "z", "b", "a"} {
			b.matmul(l, params, lt("gdn."+name), xn, r[name])
		}
		qkv, z, beta, alpha = in("qkv", r["qkv"]), in("z", r["z"]), in("b", r["b"]), in("a", r["a"])
	}

	conv := b.rowsScratch("gdn_conv", g.ConvDim())
	convState := b.state.alloc(int64((g.ConvKernel - 1) * g.ConvDim() * f32))
	b.emit(string(graph.FamilyGDNConv), graph.FamilyGDNConv, l, dims(graph.ConstKernel, g.ConvKernel), nil, [3]int{ceilDiv(g.ConvDim(), channelThreads), 1, 1}, [3]int{channelThreads, 1, 1},
		params, qkv, in("w", b.w.whole(lt("gdn.conv"))), inout("state", convState), out("y", conv))

	betaOut := b.rowsScratch("gdn_beta", g.NumValueHeads)
	decay := b.rowsScratch("gdn_g", g.NumValueHeads)
	gateArgs := []graph.Binding{params, beta}
	if !grouped {
		gateArgs = append(gateArgs, alpha)
	}
	gateArgs = append(gateArgs, in("a_log", b.w.whole(lt("gdn.a_log"))), in("dt_bias", b.w.whole(lt("gdn.dt_bias"))), out("beta", betaOut), out("g", decay))
	b.emit(string(graph.FamilyGDNGates), graph.FamilyGDNGates, l, dims(), nil, [3]int{b.T, 1, 1}, rowGroup(g.NumValueHeads), gateArgs...)

	o := b.rowsScratch("gdn_o", g.ValueDim())
	rec := b.state.alloc(int64(g.NumValueHeads * g.KeyHeadDim * g.ValueHeadDim * f32))
	b.emit(string(graph.FamilyGDNRule), graph.FamilyGDNRule, l, dims(), nil, [3]int{g.NumValueHeads, ceilDiv(g.ValueHeadDim, ruleSimdgroups*ruleColumns), 1}, [3]int{simdWidth * ruleSimdgroups, 1, 1},
		params, in("conv", conv), in("beta", betaOut), in("g", decay), inout("state", rec), out("o", o))

	y := b.rowsScratch("gdn_y", g.ValueDim())
	b.emit(string(graph.FamilyGDNNormGate), graph.FamilyGDNNormGate, l, dims(graph.ConstGateSigmoid, g.GateAct == "sigmoid"), []graph.Scalar{{Name: "eps", Value: b.a.RMSNormEps}},
		[3]int{b.T, g.NumValueHeads, 1}, rowGroup(g.ValueHeadDim),
		params, in("o", o), z, in("w", b.w.whole(lt("gdn.norm"))), out("y", y))
	b.matmul(l, params, lt("gdn.out"), y, mix)
}

func (b *builder) attention(ly layerSpec, params graph.Binding, xn, mix graph.Range) {
	at := b.a.Attention
	l, lt := ly.n, ly.t
	qRows := b.w.tensor(lt("attn.q")).Shape[0]
	kvDim := at.NumKVHeads * at.HeadDim
	qFull := b.rowsScratch("attn_qfull", qRows)
	k := b.rowsScratch("attn_k", kvDim)
	v := b.rowsScratch("attn_v", kvDim)
	b.matmul(l, params, lt("attn.q"), xn, qFull)
	b.matmul(l, params, lt("attn.k"), xn, k)
	b.matmul(l, params, lt("attn.v"), xn, v)
	sparse := ly.kind == models.LayerSparseAttention
	var sel []graph.Binding
	if sparse {
		sel = b.indexer(ly, params, xn)
	}

	ctx := b.c.Runtime.ContextLength
	kc := b.kv.alloc(int64(ctx * kvDim * f32))
	vc := b.kv.alloc(int64(ctx * kvDim * f32))
	consts := func(extra ...any) []graph.Const {
		return cs(append([]any{graph.ConstRows, b.T, graph.ConstHeads, at.NumHeads, graph.ConstKVHeads, at.NumKVHeads, graph.ConstHeadDim, at.HeadDim,
			graph.ConstRotDim, at.RotaryDim(), graph.ConstGate, at.OutputGate, graph.ConstCtx, ctx}, extra...)...)
	}
	q := b.rowsScratch("attn_q", at.NumHeads*at.HeadDim)
	// The KV cache rows written depend on params.pos, so the whole cache is the
	// declared range: conservative, and what keeps the graph static per shape.
	b.emit(string(graph.FamilyAttnPrep), graph.FamilyAttnPrep, l, consts(), []graph.Scalar{{Name: "eps", Value: b.a.RMSNormEps}, {Name: "rope_theta", Value: at.RopeTheta}},
		[3]int{b.T, at.NumHeads + at.NumKVHeads, 1}, rowGroup(at.HeadDim),
		params, in("qfull", qFull), in("k", k), in("v", v), in("q_norm", b.w.whole(lt("attn.q_norm"))), in("k_norm", b.w.whole(lt("attn.k_norm"))),
		out("q", q), inout("kcache", kc), inout("vcache", vc))
	att := b.rowsScratch("attn_out", at.NumHeads*at.HeadDim)
	args := append([]graph.Binding{params, in("q", q), in("qfull", qFull), in("kcache", kc), in("vcache", vc)}, sel...)
	ix := b.a.Indexer
	b.emit(string(graph.FamilyAttention), graph.FamilyAttention, l, consts(graph.ConstSparse, sparse, graph.ConstRatio, ix.CompressRatio, graph.ConstTopK, ix.BlockTopK()), nil,
		[3]int{b.T, at.NumHeads, 1}, [3]int{simdWidth * attnSimdgroups, 1, 1}, append(args, out("y", att))...)
	b.matmul(l, params, lt("attn.o"), att, mix)
}

// router emits top-k routing of logits for smap layer target: softmax, top-k,
// renormalisation, and with MoCE on the cache-aware substitution that reads
// the target layer's routing-visible residency.
func (b *builder) router(l, target int, params graph.Binding, logits, ids, weights graph.Range) {
	m, rt := b.a.MoE, b.c.Runtime
	consts := cs(graph.ConstRows, b.T, graph.ConstExperts, m.NumExperts, graph.ConstTopK, m.ExpertsPerToken, graph.ConstNormTopK, m.NormTopKProb)
	args := []graph.Binding{params, in("logits", logits)}
	var scalars []graph.Scalar
	if rt.MoCE {
		consts = append(consts, cs(graph.ConstMoCE, true, graph.ConstProtect, rt.MoCEProtect, graph.ConstMaxRank, rt.MoCEMaxRank)...)
		scalars = []graph.Scalar{{Name: "lambda", Value: rt.MoCELambda}}
		args = append(args, in("resident", graph.Range{Buffer: BufResidency, Offset: int64(target * m.NumExperts * 4), Size: int64(m.NumExperts * 4)}))
	}
	args = append(args, out("ids", ids), out("weights", weights))
	b.emit(string(graph.FamilyRouter), graph.FamilyRouter, l, consts, scalars, [3]int{b.T, 1, 1}, [3]int{simdWidth, 1, 1}, args...)
}

// moe emits the sparse MLP on in: router, host point, shared expert, routed
// experts, and the combine into dst (added to it when add is set).
func (b *builder) moe(ly layerSpec, params graph.Binding, xn, dst graph.Range, add bool) {
	a := b.a
	m := a.MoE
	H := a.HiddenSize
	l, lt := ly.n, ly.t

	logits := b.rowsScratch("router_logits", m.NumExperts)
	b.matmul(l, params, lt("moe.router"), xn, logits)
	var hostReads []graph.Range
	if rt := b.c.Runtime; rt.ReadAhead && l+1 < a.NumLayers {
		// Predict the next layer's experts: its router on this layer's input.
		pred := b.rowsScratch("pred_logits", m.NumExperts)
		b.matmul(l, params, trunkLayer(a, l+1).t("moe.router"), xn, pred)
		predIDs := b.rowsScratch("pred_ids", m.ExpertsPerToken)
		b.router(l, l+1, params, pred, predIDs, b.rowsScratch("pred_w", m.ExpertsPerToken))
		hostReads = []graph.Range{predIDs}
	}
	ids := b.rowsScratch("route_ids", m.ExpertsPerToken)
	weights := b.rowsScratch("route_w", m.ExpertsPerToken)
	b.router(l, l, params, logits, ids, weights)
	// The host makes the chosen experts resident here (and reads ahead the
	// predicted ones); the shared expert does not depend on them, so it runs
	// between the signal and the wait.
	b.hps = append(b.hps, graph.HostPoint{Layer: l, After: len(b.ds) - 1, Reads: hostReads})

	var shared, sharedGate graph.Range
	if m.SharedExpertIntermediateSize > 0 {
		I := m.SharedExpertIntermediateSize
		sg := b.rowsScratch("shared_g", I)
		su := b.rowsScratch("shared_u", I)
		sh := b.rowsScratch("shared_h", I)
		shared = b.rowsScratch("shared_out", H)
		sharedGate = b.rowsScratch("shared_gate", 1)
		b.matmul(l, params, lt("moe.shared.gate"), xn, sg)
		b.matmul(l, params, lt("moe.shared.up"), xn, su)
		b.matmul(l, params, lt("moe.shared_gate"), xn, sharedGate)
		b.emit(string(graph.FamilySwiGLU), graph.FamilySwiGLU, l, cs(graph.ConstRows, b.T, graph.ConstDim, I), nil, [3]int{b.T, slabs(I), 1}, rowGroup(I),
			params, in("gate", sg), in("up", su), out("y", sh))
		b.matmul(l, params, lt("moe.shared.down"), sh, shared)
	}

	gate, up, down := b.w.tensor(lt("moe.experts.gate")), b.w.tensor(lt("moe.experts.up")), b.w.tensor(lt("moe.experts.down"))
	// Kernels find an expert only through smap: its page in the experts
	// arena. The arena's size is the runtime's (all experts, or a streaming
	// budget), so the binding is the whole buffer (size 0: sized at run time).
	experts := graph.Range{Buffer: BufExperts}
	smap := graph.Range{Buffer: BufSmap, Offset: int64(l * m.NumExperts * 4), Size: int64(m.NumExperts * 4)}
	I := m.IntermediateSize
	hidden := b.rowsScratch("moe_h", m.ExpertsPerToken*I)
	// Each expert kernel is named by, and decodes, the format of the parts
	// it reads: a row policy may store down in another format than gate and
	// up (Flash-Next's 640-wide down rows under rows=fallback).
	expertConsts := func(w graph.Tensor) []graph.Const {
		return cs(graph.ConstRows, b.T, graph.ConstExperts, m.NumExperts, graph.ConstTopK, m.ExpertsPerToken, graph.ConstHidden, H, graph.ConstInter, I,
			graph.ConstWFmt, formatCode(w), graph.ConstStride, gate.Stride, graph.ConstGateOff, 0,
			graph.ConstUpOff, up.Offset-gate.Offset, graph.ConstDownOff, down.Offset-gate.Offset)
	}
	// A prefill window runs each expert's rows together on the matrix units:
	// a threadgroup per expert and tile of outputs (templates/msl/moe_gate_up,
	// moe_down). moe_down then writes one weighted output per chosen expert
	// (parts), and moe_combine sums them in rank order: no two threadgroups
	// add into one row, so the sum's order is fixed.
	gateUpGrid := [3]int{ceilDiv(I, expertSimdgroups), m.ExpertsPerToken, b.T}
	downGrid := [3]int{ceilDiv(H, expertSimdgroups), b.T, 1}
	parts := 1
	if b.T > matmulBatchRows {
		gateUpGrid = [3]int{ceilDiv(I, moeMMAOutputs), m.NumExperts, 1}
		// The last column writes zeros for ranks whose id names no expert.
		downGrid = [3]int{ceilDiv(H, matmulMMAOutputs), m.NumExperts + 1, 1}
		parts = m.ExpertsPerToken
	}
	b.emit(graph.FamilyMoEGateUp.Kernel(gate.Format), graph.FamilyMoEGateUp, l, expertConsts(gate), nil,
		gateUpGrid, expertThreadgroup,
		params, in("x", xn), in("ids", ids), in("smap", smap), in("experts", experts), out("h", hidden))
	routed := b.rowsScratch("moe_out", parts*H)
	b.emit(graph.FamilyMoEDown.Kernel(down.Format), graph.FamilyMoEDown, l, append(expertConsts(down), cs(graph.ConstParts, parts)...), nil,
		downGrid, expertThreadgroup,
		params, in("h", hidden), in("ids", ids), in("weights", weights), in("smap", smap), in("experts", experts), out("y", routed))

	target := out("x", dst)
	if add {
		target = inout("x", dst)
	}
	args := []graph.Binding{params, target, in("routed", routed)}
	if m.SharedExpertIntermediateSize > 0 {
		args = append(args, in("shared", shared), in("shared_gate", sharedGate))
	}
	b.emit(string(graph.FamilyMoECombine), graph.FamilyMoECombine, l, cs(graph.ConstRows, b.T, graph.ConstDim, H, graph.ConstParts, parts, graph.ConstShared, m.SharedExpertIntermediateSize > 0, graph.ConstAdd, add), nil,
		[3]int{b.T, slabs(H), 1}, rowGroup(H), args...)
}
