// Package gen is the generator library: from a model config it builds the
// window graph of every window shape (and, in later stages, the MSL kernels and
// Go bindings that execute it).
package gen

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

// Options select variants of a window graph.
type Options struct {
	// LastRowLogits computes the head for the last live row only, as a prefill
	// chunk needs; otherwise every row gets logits (decode and verify windows).
	LastRowLogits bool
}

const f32 = 4 // bytes per activation element

// Window builds the window graph of model c for windows of up to rows rows.
func Window(c *models.Config, rows int, opt Options) (*graph.Graph, error) {
	if rows < 1 {
		return nil, fmt.Errorf("window rows must be ≥ 1, got %d", rows)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	wl, err := layoutWeights(c)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", c.Name, err)
	}
	b := &builder{
		c: c, a: &c.Architecture, T: rows, w: wl,
		act:    arena{name: BufAct},
		state:  arena{name: BufState},
		params: arena{name: BufParams},
		region: map[string]graph.Range{},
	}
	b.build(opt)
	g := &graph.Graph{
		Model:      c.Name,
		Rows:       rows,
		LogitRows:  b.logitRows,
		Buffers:    []graph.Buffer{wl.weights.buffer(graph.KindWeights), wl.experts.buffer(graph.KindExperts), b.state.buffer(graph.KindState), b.act.buffer(graph.KindScratch), b.params.buffer(graph.KindParams)},
		Tensors:    wl.tensors,
		Params:     b.paramList,
		Dispatches: b.ds,
		HostPoints: b.hps,
		Outputs:    []graph.Range{b.logits},
	}
	graph.PlaceBarriers(g.Dispatches)
	if err := g.Check(); err != nil {
		return nil, fmt.Errorf("generator produced an inconsistent graph: %w", err)
	}
	return g, nil
}

type builder struct {
	c      *models.Config
	a      *models.Architecture
	T      int
	w      *weightLayout
	act    arena
	state  arena
	params arena
	region map[string]graph.Range // scratch activations, shared by every layer

	paramList []graph.Param
	ds        []graph.Dispatch
	hps       []graph.HostPoint
	logits    graph.Range
	logitRows int
}

// scratch returns the activation region name of cols f32 per row (T rows),
// allocating it on first use; layers reuse the same regions, and the barrier
// rule orders the reuse.
func (b *builder) scratch(name string, rows, cols int) graph.Range {
	if r, ok := b.region[name]; ok {
		return r
	}
	r := b.act.alloc(int64(rows * cols * f32))
	b.region[name] = r
	return r
}

func (b *builder) rowsScratch(name string, cols int) graph.Range { return b.scratch(name, b.T, cols) }

// arg helpers
func in(name string, r graph.Range) graph.Binding {
	return graph.Binding{Name: name, Access: graph.Read, Range: r}
}
func out(name string, r graph.Range) graph.Binding {
	return graph.Binding{Name: name, Access: graph.Write, Range: r}
}
func inout(name string, r graph.Range) graph.Binding {
	return graph.Binding{Name: name, Access: graph.ReadWrite, Range: r}
}
func cs(kv ...any) []graph.Const {
	var out []graph.Const
	for i := 0; i < len(kv); i += 2 {
		var v int64
		switch x := kv[i+1].(type) {
		case int:
			v = int64(x)
		case int64:
			v = x
		case bool:
			if x {
				v = 1
			}
		}
		out = append(out, graph.Const{Name: kv[i].(string), Value: v})
	}
	return out
}

// emit appends a dispatch. Argument slots follow the binding order; reads and
// writes follow the access modes. Every row-wise kernel binds params first.
func (b *builder) emit(kernel, family string, layer int, consts []graph.Const, scalars []graph.Scalar, grid, tg [3]int, args ...graph.Binding) {
	d := graph.Dispatch{Kernel: kernel, Family: family, Layer: layer, Consts: consts, Scalars: scalars, Grid: grid, Threadgroup: tg}
	for i, a := range args {
		a.Slot = i
		d.Args = append(d.Args, a)
		if a.Access == graph.Read || a.Access == graph.ReadWrite {
			d.Reads = append(d.Reads, a.Range)
		}
		if a.Access == graph.Write || a.Access == graph.ReadWrite {
			d.Writes = append(d.Writes, a.Range)
		}
	}
	b.ds = append(b.ds, d)
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// rowGroup is the threadgroup of a row-wise kernel over n values: one
// simdgroup per 32 values, at most 8.
func rowGroup(n int) [3]int { return [3]int{min(256, 32*ceilDiv(n, 32)), 1, 1} }

func (b *builder) build(opt Options) {
	a := b.a
	H := a.HiddenSize
	b.paramList = []graph.Param{
		{Name: ParamRows, Offset: 0, Count: 1},
		{Name: ParamPos, Offset: 4, Count: 1},
		{Name: ParamTokens, Offset: 16, Count: b.T},
	}
	b.params.alloc(16 + 4*int64(b.T))
	params := in("params", graph.Range{Buffer: BufParams, Offset: 0, Size: 16 + 4*int64(b.T)})

	x := b.rowsScratch("x", H)
	embed := b.w.tensor("embed")
	b.emit("embed_"+embed.Format, "embed", -1, cs("rows", b.T, "dim", H, "vocab", a.VocabSize, "wfmt", formatCode(embed)), nil,
		[3]int{b.T, 1, 1}, rowGroup(H), params, in("table", b.w.whole("embed")), out("x", x))

	for l := 0; l < a.NumLayers; l++ {
		xn := b.rowsScratch("xn", H)
		b.rmsnorm(l, params, x, models.LayerTensor(l, "attn_norm"), xn, H, true)
		mix := b.rowsScratch("mix", H)
		switch a.LayerTypes[l] {
		case models.LayerLinearAttention:
			b.gatedDeltaNet(l, params, xn, mix)
		case models.LayerFullAttention:
			b.attention(l, params, xn, mix)
		}
		b.emit("residual_add", "residual_add", l, cs("rows", b.T, "dim", H), nil, [3]int{b.T, 1, 1}, rowGroup(H),
			params, inout("x", x), in("y", mix))
		b.moe(l, params, x)
	}

	fin := x
	b.logitRows = b.T
	if opt.LastRowLogits {
		b.logitRows = 1
		fin = b.scratch("x_last", 1, H)
		b.emit("copy_last_row", "copy_last_row", -1, cs("rows", b.T, "dim", H), nil, [3]int{1, 1, 1}, rowGroup(H),
			params, in("x", x), out("y", fin))
	}
	fn := b.scratch("final_normed", b.logitRows, H)
	b.rmsnormRows(-1, params, fin, "final_norm", fn, H, true, b.logitRows)
	b.logits = b.scratch("logits", b.logitRows, a.VocabSize)
	b.matmulRows(-1, params, "head", fn, b.logits, b.logitRows)
}

func (b *builder) rmsnorm(layer int, params graph.Binding, x graph.Range, weight string, y graph.Range, dim int, zeroCentred bool) {
	b.rmsnormRows(layer, params, x, weight, y, dim, zeroCentred, b.T)
}

func (b *builder) rmsnormRows(layer int, params graph.Binding, x graph.Range, weight string, y graph.Range, dim int, zeroCentred bool, rows int) {
	b.emit("rmsnorm", "rmsnorm", layer, cs("rows", rows, "dim", dim, "zero_centred", zeroCentred),
		[]graph.Scalar{{Name: "eps", Value: b.a.RMSNormEps}}, [3]int{rows, 1, 1}, rowGroup(dim),
		params, in("x", x), in("w", b.w.whole(weight)), out("y", y))
}

// matmul emits y[t] = W x[t] for the live rows: W is [n, k] in its format.
func (b *builder) matmul(layer int, params graph.Binding, weight string, x, y graph.Range) {
	b.matmulRows(layer, params, weight, x, y, b.T)
}

func (b *builder) matmulRows(layer int, params graph.Binding, weight string, x, y graph.Range, rows int) {
	t := b.w.tensor(weight)
	n, k := t.Shape[0], t.Shape[1]
	const rowsPerGroup = 4 // one output row per simdgroup
	b.emit("matmul_"+t.Format, "matmul", layer, cs("rows", rows, "n", n, "k", k, "wfmt", formatCode(t)), nil,
		[3]int{ceilDiv(n, rowsPerGroup), rows, 1}, [3]int{32 * rowsPerGroup, 1, 1},
		params, in("w", b.w.whole(weight)), in("x", x), out("y", y))
}

func (b *builder) gatedDeltaNet(l int, params graph.Binding, xn, mix graph.Range) {
	g := b.a.LinearAttention
	lt := func(r string) string { return models.LayerTensor(l, r) }
	qkvz := b.rowsScratch("gdn_qkvz", 2*g.KeyDim()+2*g.ValueDim())
	ba := b.rowsScratch("gdn_ba", 2*g.NumValueHeads)
	b.matmul(l, params, lt("gdn.qkvz"), xn, qkvz)
	b.matmul(l, params, lt("gdn.ba"), xn, ba)

	dims := func(extra ...any) []graph.Const {
		return cs(append([]any{"rows", b.T, "nk", g.NumKeyHeads, "nv", g.NumValueHeads, "dk", g.KeyHeadDim, "dv", g.ValueHeadDim}, extra...)...)
	}
	conv := b.rowsScratch("gdn_conv", g.ConvDim())
	convState := b.state.alloc(int64((g.ConvKernel - 1) * g.ConvDim() * f32))
	b.emit("gdn_conv", "gdn_conv", l, dims("kernel", g.ConvKernel), nil, [3]int{ceilDiv(g.ConvDim(), 256), 1, 1}, [3]int{256, 1, 1},
		params, in("qkvz", qkvz), in("w", b.w.whole(lt("gdn.conv"))), inout("state", convState), out("y", conv))

	beta := b.rowsScratch("gdn_beta", g.NumValueHeads)
	decay := b.rowsScratch("gdn_g", g.NumValueHeads)
	b.emit("gdn_gates", "gdn_gates", l, dims(), nil, [3]int{b.T, 1, 1}, rowGroup(g.NumValueHeads),
		params, in("ba", ba), in("a_log", b.w.whole(lt("gdn.a_log"))), in("dt_bias", b.w.whole(lt("gdn.dt_bias"))), out("beta", beta), out("g", decay))

	o := b.rowsScratch("gdn_o", g.ValueDim())
	rec := b.state.alloc(int64(g.NumValueHeads * g.KeyHeadDim * g.ValueHeadDim * f32))
	b.emit("gdn_rule", "gdn_rule", l, dims(), nil, [3]int{g.NumValueHeads, ceilDiv(g.ValueHeadDim, 32), 1}, [3]int{32, 1, 1},
		params, in("conv", conv), in("beta", beta), in("g", decay), inout("state", rec), out("o", o))

	y := b.rowsScratch("gdn_y", g.ValueDim())
	b.emit("gdn_norm_gate", "gdn_norm_gate", l, dims(), []graph.Scalar{{Name: "eps", Value: b.a.RMSNormEps}},
		[3]int{b.T, g.NumValueHeads, 1}, rowGroup(g.ValueHeadDim),
		params, in("o", o), in("qkvz", qkvz), in("w", b.w.whole(lt("gdn.norm"))), out("y", y))
	b.matmul(l, params, lt("gdn.out"), y, mix)
}

func (b *builder) attention(l int, params graph.Binding, xn, mix graph.Range) {
	at := b.a.Attention
	lt := func(r string) string { return models.LayerTensor(l, r) }
	qRows := b.w.tensor(lt("attn.q")).Shape[0]
	kvDim := at.NumKVHeads * at.HeadDim
	qFull := b.rowsScratch("attn_qfull", qRows)
	k := b.rowsScratch("attn_k", kvDim)
	v := b.rowsScratch("attn_v", kvDim)
	b.matmul(l, params, lt("attn.q"), xn, qFull)
	b.matmul(l, params, lt("attn.k"), xn, k)
	b.matmul(l, params, lt("attn.v"), xn, v)

	ctx := b.c.Runtime.ContextLength
	kc := b.state.alloc(int64(ctx * kvDim * f32))
	vc := b.state.alloc(int64(ctx * kvDim * f32))
	consts := func() []graph.Const {
		return cs("rows", b.T, "heads", at.NumHeads, "kv_heads", at.NumKVHeads, "head_dim", at.HeadDim,
			"rot_dim", at.RotaryDim(), "gate", at.OutputGate, "ctx", ctx)
	}
	q := b.rowsScratch("attn_q", at.NumHeads*at.HeadDim)
	// The KV cache rows written depend on params.pos, so the whole cache is the
	// declared range: conservative, and what keeps the graph static per shape.
	b.emit("attn_prep", "attn_prep", l, consts(), []graph.Scalar{{Name: "eps", Value: b.a.RMSNormEps}, {Name: "rope_theta", Value: at.RopeTheta}},
		[3]int{b.T, at.NumHeads + at.NumKVHeads, 1}, rowGroup(at.HeadDim),
		params, in("qfull", qFull), in("k", k), in("v", v), in("q_norm", b.w.whole(lt("attn.q_norm"))), in("k_norm", b.w.whole(lt("attn.k_norm"))),
		out("q", q), inout("kcache", kc), inout("vcache", vc))
	att := b.rowsScratch("attn_out", at.NumHeads*at.HeadDim)
	b.emit("attention", "attention", l, consts(), nil, [3]int{b.T, at.NumHeads, 1}, [3]int{32, 1, 1},
		params, in("q", q), in("qfull", qFull), in("kcache", kc), in("vcache", vc), out("y", att))
	b.matmul(l, params, lt("attn.o"), att, mix)
}

func (b *builder) moe(l int, params graph.Binding, x graph.Range) {
	a := b.a
	m := a.MoE
	H := a.HiddenSize
	lt := func(r string) string { return models.LayerTensor(l, r) }
	xn := b.rowsScratch("xn", H)
	b.rmsnorm(l, params, x, lt("ffn_norm"), xn, H, true)

	logits := b.rowsScratch("router_logits", m.NumExperts)
	b.matmul(l, params, lt("moe.router"), xn, logits)
	ids := b.rowsScratch("route_ids", m.ExpertsPerToken)
	weights := b.rowsScratch("route_w", m.ExpertsPerToken)
	b.emit("router", "router", l, cs("rows", b.T, "experts", m.NumExperts, "top_k", m.ExpertsPerToken, "norm_topk", m.NormTopKProb), nil,
		[3]int{b.T, 1, 1}, [3]int{32, 1, 1}, params, in("logits", logits), out("ids", ids), out("weights", weights))
	// The host makes the chosen experts resident here; the shared expert does
	// not depend on them, so it runs between the signal and the wait.
	b.hps = append(b.hps, graph.HostPoint{Layer: l, After: len(b.ds) - 1})

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
		b.emit("swiglu", "swiglu", l, cs("rows", b.T, "dim", I), nil, [3]int{b.T, 1, 1}, rowGroup(I),
			params, in("gate", sg), in("up", su), out("y", sh))
		b.matmul(l, params, lt("moe.shared.down"), sh, shared)
	}

	gate, up, down := b.w.tensor(lt("moe.experts.gate")), b.w.tensor(lt("moe.experts.up")), b.w.tensor(lt("moe.experts.down"))
	experts := b.w.whole(lt("moe.experts.gate")) // gate, up and down interleave: the union is the gate range widened
	experts.Size = b.w.whole(lt("moe.experts.down")).End() - experts.Offset
	I := m.IntermediateSize
	hidden := b.rowsScratch("moe_h", m.ExpertsPerToken*I)
	expertConsts := func() []graph.Const {
		return cs("rows", b.T, "experts", m.NumExperts, "top_k", m.ExpertsPerToken, "hidden", H, "inter", I,
			"wfmt", formatCode(gate), "stride", gate.Stride, "gate_off", gate.Offset-experts.Offset,
			"up_off", up.Offset-experts.Offset, "down_off", down.Offset-experts.Offset)
	}
	b.emit("moe_gate_up_"+gate.Format, "moe_gate_up", l, expertConsts(), nil,
		[3]int{ceilDiv(I, 4), m.ExpertsPerToken, b.T}, [3]int{128, 1, 1},
		params, in("x", xn), in("ids", ids), in("experts", experts), out("h", hidden))
	routed := b.rowsScratch("moe_out", H)
	b.emit("moe_down_"+gate.Format, "moe_down", l, expertConsts(), nil,
		[3]int{ceilDiv(H, 4), b.T, 1}, [3]int{128, 1, 1},
		params, in("h", hidden), in("ids", ids), in("weights", weights), in("experts", experts), out("y", routed))

	args := []graph.Binding{params, inout("x", x), in("routed", routed)}
	if m.SharedExpertIntermediateSize > 0 {
		args = append(args, in("shared", shared), in("shared_gate", sharedGate))
	}
	b.emit("moe_combine", "moe_combine", l, cs("rows", b.T, "dim", H, "shared", m.SharedExpertIntermediateSize > 0), nil,
		[3]int{b.T, 1, 1}, rowGroup(H), args...)
}

// Windows builds the graph of every window shape the model config asks for,
// plus extra row counts (e.g. a prefill chunk chosen on the command line).
// Prefill shapes (larger than max_decode_rows) compute last-row logits unless
// allLogits is set; decode shapes always compute every row's logits, since
// verification windows need them.
func Windows(c *models.Config, allLogits bool, extra ...int) ([]*graph.Graph, error) {
	seen := map[int]bool{}
	var out []*graph.Graph
	for _, t := range append(c.Windows.Shapes(), extra...) {
		if seen[t] {
			continue
		}
		seen[t] = true
		g, err := Window(c, t, Options{LastRowLogits: !allLogits && t > c.Windows.MaxDecodeRows})
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}
