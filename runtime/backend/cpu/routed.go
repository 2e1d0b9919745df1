package cpu

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// routedStep is one MoE layer's routed experts (its moe_gate_up and
// moe_down dispatches), prepared so layer-major prefill can run them for
// the rows of many windows at once (backend.RoutedBatcher): the layer's
// experts then meet every row of the prompt routed to them in one pass, so
// they take the multi-row kernels where one window gives each about a row.
type routedStep struct {
	layer        int
	gateUp, down int // their dispatches
	read         func(b *backend.RoutedBatch) (int, error)
	run          func(b *backend.RoutedBatch, only []bool) error
	write        func(b *backend.RoutedBatch, row0 int) error
}

// newRoutedStep prepares the routed experts of gu (moe_gate_up) and dn
// (moe_down), both of one layer, bound as their kernels bind them.
func newRoutedStep(gi, di int, gu, dn *args) (*routedStep, error) {
	pg, pd := gu.params(), dn.params()
	egu, edn := gu.expertBlock(), dn.expertBlock()
	K := gu.int(graph.ConstTopK)
	H, I := egu.hidden, egu.inter
	x, ids := gu.f32n("x", pg.max*H), gu.u32("ids")
	parts := dn.int(graph.ConstParts)
	w, y := dn.f32n("weights", pd.max*K), dn.f32n("y", pd.max*parts*H)
	guNames, dnNames := gu.gateUpNames(egu), dn.downNames(edn)
	if err := cmp.Or(gu.err, dn.err); err != nil {
		return nil, err
	}
	if dn.int(graph.ConstTopK) != K || edn.hidden != H || edn.inter != I || edn.experts != egu.experts {
		return nil, fmt.Errorf("layer %d: moe_gate_up and moe_down disagree on the expert shapes", gu.d.Layer)
	}
	pl := gu.pool
	var ds downScratch
	var masked []uint32
	var groups []expertGroup
	return &routedStep{
		layer: gu.d.Layer, gateUp: gi, down: di,
		read: func(b *backend.RoutedBatch) (int, error) {
			if b.TopK == 0 {
				b.TopK = K
			}
			if b.TopK != K {
				return 0, fmt.Errorf("layer %d: a batch of %d choices a row, the layer routes to %d", gu.d.Layer, b.TopK, K)
			}
			n, row0 := pg.rows(), b.Rows
			b.X = append(b.X, x[:n*H]...)
			b.IDs = append(b.IDs, ids[:n*K]...)
			b.Rows += n
			return row0, nil
		},
		run: func(b *backend.RoutedBatch, only []bool) error {
			if len(b.X) != b.Rows*H || len(b.IDs) != b.Rows*K || len(only) != egu.experts {
				return fmt.Errorf("layer %d: a batch of %d rows with %d values and %d choices, and %d experts to run of %d",
					gu.d.Layer, b.Rows, len(b.X), len(b.IDs), len(only), egu.experts)
			}
			if len(b.Vals) != b.Rows*K*H || len(b.Done) != b.Rows*K {
				// A batch's first group: the values of every choice, none
				// done yet (a reused batch keeps its capacity).
				b.Vals = slices.Grow(b.Vals[:0], b.Rows*K*H)[:b.Rows*K*H]
				b.Done = slices.Grow(b.Done[:0], b.Rows*K)[:b.Rows*K]
				clear(b.Done)
			}
			// The choices of other experts are left out as ids past the
			// layer's experts (groupByExpert skips those).
			masked = append(masked[:0], b.IDs...)
			for tj, e := range masked {
				if int(e) >= egu.experts || !only[e] {
					masked[tj] = uint32(egu.experts)
				}
			}
			groups = groupByExpert(masked, egu.experts, groups)
			buf := scratch.Get().(*[]float32) // h: the batch's gate/up products
			defer scratch.Put(buf)
			if cap(*buf) < b.Rows*K*I {
				*buf = make([]float32, b.Rows*K*I)
			}
			h := (*buf)[:b.Rows*K*I]
			gateUpGroups(pl, egu, K, b.X, b.Rows, groups, guNames, h)
			done := ds.done(b.Rows * K)
			downGroups(pl, edn, K, h, groups, dnNames, b.Vals, done, &ds)
			for tj, ok := range done {
				b.Done[tj] = b.Done[tj] || ok
			}
			return nil
		},
		write: func(b *backend.RoutedBatch, row0 int) error {
			n := pd.rows()
			if row0 < 0 || row0+n > b.Rows || len(b.Vals) != b.Rows*K*H {
				return fmt.Errorf("layer %d: a window of %d rows from row %d of a batch of %d rows (%d values)", gu.d.Layer, n, row0, b.Rows, len(b.Vals))
			}
			weighDown(pl, parts, K, H, n, w, b.Vals[row0*K*H:(row0+n)*K*H], b.Done[row0*K:(row0+n)*K], y)
			return nil
		},
	}, nil
}

// routedSteps prepares every MoE layer's routed experts of g (the first
// dispatch of each family and layer: a chunked dispatch's other chunks do
// nothing here). A layer with more than one of either is left out.
func routedSteps(g *graph.Graph, newArgs func(d *graph.Dispatch) *args) (map[int]*routedStep, error) {
	type pair struct{ gateUp, down, count int }
	found := map[int]*pair{}
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		if d.Family != graph.FamilyMoEGateUp && d.Family != graph.FamilyMoEDown {
			continue
		}
		if off, chunked := d.GridOffset(); chunked && off != [3]int{} {
			continue
		}
		p := found[d.Layer]
		if p == nil {
			p = &pair{gateUp: -1, down: -1}
			found[d.Layer] = p
		}
		p.count++
		if d.Family == graph.FamilyMoEGateUp {
			p.gateUp = i
		} else {
			p.down = i
		}
	}
	out := map[int]*routedStep{}
	for layer, p := range found {
		if p.count != 2 || p.gateUp < 0 || p.down < p.gateUp {
			continue
		}
		rs, err := newRoutedStep(p.gateUp, p.down, newArgs(&g.Dispatches[p.gateUp]), newArgs(&g.Dispatches[p.down]))
		if err != nil {
			return nil, err
		}
		out[layer] = rs
	}
	return out, nil
}

var _ backend.RoutedBatcher = (*Program)(nil)

// routedIn is segment k's routed experts: those of the layer whose router
// ends segment k-1, when both their dispatches lie in segment k.
func (p *Program) routedIn(k int) (*routedStep, bool) {
	hps := p.Graph.HostPoints
	if k < 1 || k > len(hps) {
		return nil, false
	}
	rs, ok := p.routed[hps[k-1].Layer]
	if !ok {
		return nil, false
	}
	lo, hi, err := backend.SegmentBounds(hps, k, len(p.steps))
	if err != nil || rs.gateUp < lo || rs.down >= hi {
		return nil, false
	}
	return rs, true
}

// Routed says whether segment k runs routed experts.
func (p *Program) Routed(k int) bool {
	_, ok := p.routedIn(k)
	return ok
}

// ReadRouted appends segment k's routed-expert inputs to b.
func (p *Program) ReadRouted(k int, b *backend.RoutedBatch) (int, error) {
	rs, ok := p.routedIn(k)
	if !ok {
		return 0, fmt.Errorf("segment %d runs no routed experts", k)
	}
	return rs.read(b)
}

// RunRouted computes b's choices of the experts in only.
func (p *Program) RunRouted(k int, b *backend.RoutedBatch, only []bool) error {
	rs, ok := p.routedIn(k)
	if !ok {
		return fmt.Errorf("segment %d runs no routed experts", k)
	}
	return rs.run(b, only)
}

// RunSegmentRouted runs segment k with its routed experts taken from b.
func (p *Program) RunSegmentRouted(k int, b *backend.RoutedBatch, row0 int, host func(graph.HostPoint) error) error {
	rs, ok := p.routedIn(k)
	if !ok {
		return fmt.Errorf("segment %d runs no routed experts", k)
	}
	var werr error
	p.swap = map[int]func(){
		rs.gateUp: func() {},
		rs.down:   func() { werr = rs.write(b, row0) },
	}
	defer func() { p.swap = nil }()
	if err := p.RunSegment(k, host); err != nil {
		return err
	}
	return werr
}
