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
	// MTP builds the window of the MTP draft head instead of the trunk: it
	// reads the hidden rows the trunk window left in the mtp_hidden buffer.
	MTP bool
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
		kv:     arena{name: BufKV},
		params: arena{name: BufParams},
		carry:  arena{name: BufMTPHidden},
		region: map[string]graph.Range{},
	}
	kind := graph.KindTrunk
	if opt.MTP {
		if c.Architecture.MTP.NumLayers == 0 {
			return nil, fmt.Errorf("model %s has no MTP layer (architecture.mtp.num_layers = 0)", c.Name)
		}
		kind = graph.KindMTP
		b.state.name, b.kv.name = BufMTPState, BufMTPKV // the draft head's own caches
		b.buildMTP()
	} else {
		b.build(opt)
	}
	buffers := []graph.Buffer{wl.weights.buffer(graph.KindWeights), wl.experts.buffer(graph.KindExperts),
		{Name: BufSmap, Kind: graph.KindSmap, Size: int64(smapEntries(c) * 4)}}
	if c.Runtime.MoCE {
		buffers = append(buffers, graph.Buffer{Name: BufResidency, Kind: graph.KindResidency, Size: int64(smapEntries(c) * 4)})
	}
	for _, o := range []struct {
		a    *arena
		kind string
	}{{&b.state, graph.KindState}, {&b.kv, graph.KindCache}, {&b.act, graph.KindScratch}, {&b.params, graph.KindParams}, {&b.carry, graph.KindCarry}} {
		if o.a.size > 0 {
			buffers = append(buffers, o.a.buffer(o.kind))
		}
	}
	g := &graph.Graph{
		Model:      c.Name,
		Kind:       kind,
		Rows:       rows,
		LogitRows:  b.logitRows,
		Buffers:    buffers,
		Tensors:    wl.tensors,
		Params:     b.paramList,
		Dispatches: b.ds,
		HostPoints: b.hps,
		Outputs:    []graph.Range{b.logits},
	}
	if b.best.Size > 0 {
		g.Outputs = append(g.Outputs, b.best)
	}
	if err := graph.Optimize(g); err != nil {
		return nil, fmt.Errorf("optimizing the window graph: %w", err)
	}
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
	kv     arena                  // position-indexed caches: KV, raw index keys, pooled block keys
	carry  arena                  // the trunk's last hidden rows, for the MTP head
	region map[string]graph.Range // scratch activations, shared by every layer
	// pleRows is where the host writes each PLE layer's gathered n-gram rows.
	pleRows map[int]graph.Range

	paramList []graph.Param
	ds        []graph.Dispatch
	hps       []graph.HostPoint
	logits    graph.Range
	logitRows int
	best      graph.Range // greedy's choice per logits row (argmax); none in MTP windows
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
		out = append(out, graph.Const{Name: kv[i].(graph.ConstName), Value: v})
	}
	return out
}

// emit appends a dispatch. Argument slots follow the binding order; reads and
// writes follow the access modes. Every row-wise kernel binds params first.
func (b *builder) emit(kernel string, family graph.Family, layer int, consts []graph.Const, scalars []graph.Scalar, grid, tg [3]int, args ...graph.Binding) {
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

// slabs is how many rowGroup(n) threadgroups cover n values: the elementwise
// row kernels split a row over that many, so a one-row decode window still
// spreads over the GPU instead of one threadgroup walking the whole row.
func slabs(n int) int { return ceilDiv(n, rowGroup(n)[0]) }

// smapEntries is one smap entry per routed expert of every MoE layer, the
// MTP layers after the trunk's.
func smapEntries(c *models.Config) int {
	a := &c.Architecture
	return (a.NumLayers + a.MTP.NumLayers) * a.MoE.NumExperts
}

// Windows builds the graph of every window shape the model config asks for,
// plus extra row counts (e.g. a prefill chunk chosen on the command line).
// Prefill shapes (larger than max_decode_rows) compute last-row logits unless
// allLogits is set; decode shapes always compute every row's logits, since
// verification windows need them. A model with an MTP head also gets its
// draft windows, one per shape.
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
		if c.Architecture.MTP.NumLayers > 0 {
			m, err := Window(c, t, Options{MTP: true})
			if err != nil {
				return nil, err
			}
			out = append(out, m)
		}
	}
	return out, nil
}
