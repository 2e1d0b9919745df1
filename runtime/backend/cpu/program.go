// Package cpu is the pure-Go backend: one Go function per kernel family,
// executing a window graph over host buffers. It is the reference every other
// backend is held to, so it favours clear, exact math over speed, but it still
// uses every core: a kernel splits its work across goroutines, and the
// dispatches of one barrier group may run concurrently (which turns a wrongly
// pruned barrier into a data race that `go test -race` reports).
package cpu

import (
	"fmt"
	"math/rand"
	"sync"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Program is a window graph bound to memory: one prepared closure per
// dispatch. It is the cpu backend's backend.HostProgram.
type Program struct {
	Graph  *graph.Graph
	order  backend.Order
	seed   int64
	steps  []func()
	groups [][]int
	rng    *rand.Rand
	// routed is each MoE layer's routed experts (routed.go); swap, while
	// set, replaces some steps (a segment whose experts ran batched).
	routed map[int]*routedStep
	swap   map[int]func()
}

// kernelFunc prepares a dispatch: it resolves bindings and constants once and
// returns the closure that runs it.
type kernelFunc func(d *graph.Dispatch, a *args) (func(), error)

var families = map[graph.Family]kernelFunc{
	graph.FamilyEmbed:       embed,
	graph.FamilyRMSNorm:     rmsnorm,
	graph.FamilyMatmul:      matmul,
	graph.FamilyResidualAdd: residualAdd,
	graph.FamilyGDNConv:     gdnConv,
	graph.FamilyGDNGates:    gdnGates,
	graph.FamilyGDNRule:     gdnRule,
	graph.FamilyGDNNormGate: gdnNormGate,
	graph.FamilyAttnPrep:    attnPrep,
	graph.FamilyAttention:   attention,
	graph.FamilyRouter:      router,
	graph.FamilySwiGLU:      swiglu,
	graph.FamilyMoEGateUp:   moeGateUp,
	graph.FamilyMoEDown:     moeDown,
	graph.FamilyMoECombine:  moeCombine,
	graph.FamilyCopyLastRow: copyLastRow,
	graph.FamilyHCAct:       hcAct,
	graph.FamilyHCMix:       hcMix,
	graph.FamilyHCInject:    hcInject,
	graph.FamilyPLEGate:     pleGate,
	graph.FamilyPLEConv:     pleConv,
	graph.FamilyIndexPrep:   indexPrep,
	graph.FamilyIndexPool:   indexPool,
	graph.FamilyIndexSelect: indexSelect,
	graph.FamilyArgmax:      argmaxRows,
	graph.FamilyCopyRows:    copyRows,
	graph.FamilyConcat:      concat,
	graph.FamilyStreamAdd:   streamAdd,
}

// Compile binds every dispatch of g to mem, its kernels on Backend's
// threads (one per core).
func Compile(g *graph.Graph, mem *backend.HostMemory) (*Program, error) {
	return Backend.CompileHost(g, mem)
}

// CompileHost binds every dispatch of g to mem, its kernels on h's threads.
func (h *Host) CompileHost(g *graph.Graph, mem *backend.HostMemory) (*Program, error) {
	p := &Program{Graph: g, groups: g.Groups()}
	expertBase := map[int]int64{}
	for l, t := range graph.ExpertGates(g.Tensors) {
		expertBase[l] = t.Offset
	}
	tensors := map[tensorKey]graph.Tensor{}
	for _, t := range g.Tensors {
		tensors[tensorKey{t.Buffer, t.Offset}] = t
	}
	newArgs := func(d *graph.Dispatch) *args {
		return &args{d: d, mem: mem, tensors: tensors, expertBase: expertBase, pool: h.pool}
	}
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		if off, chunked := d.GridOffset(); chunked && off != [3]int{} {
			// The Go kernels ignore the grid: the chunk at offset zero does
			// the whole dispatch, the other chunks nothing.
			p.steps = append(p.steps, func() {})
			continue
		}
		fam, ok := families[d.Family]
		if !ok {
			return nil, fmt.Errorf("dispatch %d: the cpu backend has no kernel family %q", i, d.Family)
		}
		step, err := fam(d, newArgs(d))
		if err != nil {
			return nil, fmt.Errorf("dispatch %d (%s, layer %d): %w", i, d.Kernel, d.Layer, err)
		}
		p.steps = append(p.steps, step)
	}
	routed, err := routedSteps(g, newArgs)
	if err != nil {
		return nil, err
	}
	p.routed = routed
	return p, nil
}

var _ backend.Ordered = (*Program)(nil)

// Run executes the window once; without host points to serve it cannot fail.
func (p *Program) Run() error { return p.RunHost(nil) }

// SetOrder sets how the dispatches of each barrier group run from the next
// window on (backend.Shuffled draws its orders from seed).
func (p *Program) SetOrder(o backend.Order, seed int64) {
	p.order, p.seed, p.rng = o, seed, nil
}

// RunHost executes the window, calling host at every host point once the
// group holding its router has run (the host makes the routed experts
// resident there); a host error stops the window.
func (p *Program) RunHost(host func(graph.HostPoint) error) error {
	next := 0 // the next host point
	hps := p.Graph.HostPoints
	for g, grp := range p.groups {
		p.runGroup(grp)
		last := grp[len(grp)-1]
		for ; next < len(hps) && hps[next].After <= last; next++ {
			if host == nil {
				continue
			}
			if err := p.callHost(host, g, next); err != nil {
				return err
			}
		}
	}
	return nil
}

var _ backend.SegmentedProgram = (*Program)(nil)

// RunSegment runs segment k of the window: the dispatches after host point
// k-1's router through host point k's router, then host at point k
// (segment len(HostPoints): the dispatches after the last router). A
// barrier group cut by a router runs its part up to the router in one
// segment and the rest in the next (a group's dispatches are independent).
func (p *Program) RunSegment(k int, host func(graph.HostPoint) error) error {
	hps := p.Graph.HostPoints
	lo, hi, err := backend.SegmentBounds(hps, k, len(p.steps))
	if err != nil {
		return err
	}
	for _, grp := range p.groups {
		if grp[len(grp)-1] < lo {
			continue
		}
		if grp[0] >= hi {
			break
		}
		first, last := max(grp[0], lo), min(grp[len(grp)-1], hi-1)
		p.runGroup(grp[first-grp[0] : last-grp[0]+1]) // a group's indices are consecutive
	}
	if k == len(hps) || host == nil {
		return nil
	}
	return host(hps[k])
}

// callHost calls host at host point i, whose router ran in group g.
func (p *Program) callHost(host func(graph.HostPoint) error, g, i int) error {
	hp := p.Graph.HostPoints[i]
	if last := p.groups[g][len(p.groups[g])-1]; hp.Wait > 0 && hp.Wait <= last {
		return fmt.Errorf("host point of layer %d: dispatch %d needs the host but ran in the router's barrier group", hp.Layer, hp.Wait)
	}
	return host(hp)
}

// runGroup runs one barrier group's dispatches in the program's order.
func (p *Program) runGroup(grp []int) {
	if p.order == backend.Shuffled && p.rng == nil {
		p.rng = rand.New(rand.NewSource(p.seed))
	}
	switch {
	case p.order == backend.Concurrent && len(grp) > 1:
		var wg sync.WaitGroup
		for _, i := range grp {
			wg.Add(1)
			go func() { defer wg.Done(); p.step(i)() }()
		}
		wg.Wait()
	case p.order == backend.Shuffled:
		perm := p.rng.Perm(len(grp))
		for _, j := range perm {
			p.step(grp[j])()
		}
	default:
		for _, i := range grp {
			p.step(i)()
		}
	}
}

// step is dispatch i's closure, or what swap puts in its place.
func (p *Program) step(i int) func() {
	if f, ok := p.swap[i]; ok {
		return f
	}
	return p.steps[i]
}

// args resolves a dispatch's bindings and constants, collecting the first error.
type args struct {
	d       *graph.Dispatch
	mem     *backend.HostMemory
	tensors map[tensorKey]graph.Tensor // weight placements by where they start
	// expertBase is where each MoE layer's expert tensors start in the
	// experts buffer (their records give the row layouts), by dispatch layer.
	expertBase map[int]int64
	pool       *pool // the backend's threads
	err        error
}

// tensorKey is where a weight tensor starts: a weight binding's offset (plus,
// for an expert block, a part's offset) finds the tensor it reads, and so its
// storage format and row padding.
type tensorKey struct {
	buffer string
	offset int64
}

func (a *args) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

func (a *args) bytes(name string) []byte {
	b, ok := a.d.Arg(name)
	if !ok {
		a.fail(fmt.Errorf("missing binding %q", name))
		return nil
	}
	out, err := a.mem.Bytes(b.Range)
	if err != nil {
		a.fail(fmt.Errorf("binding %q: %w", name, err))
	}
	return out
}

func (a *args) f32(name string) []float32 { return backend.Float32s(a.bytes(name)) }
func (a *args) u32(name string) []uint32  { return backend.Uint32s(a.bytes(name)) }

// f32n is a float32 binding that must hold at least n values.
func (a *args) f32n(name string, n int) []float32 {
	v := a.f32(name)
	if a.err == nil && len(v) < n {
		a.fail(fmt.Errorf("binding %q holds %d floats, the kernel needs %d", name, len(v), n))
	}
	return v
}

func (a *args) int(name graph.ConstName) int {
	v, ok := a.d.Const(name)
	if !ok {
		a.fail(fmt.Errorf("missing constant %q", name))
	}
	return int(v)
}

// optInt is a constant that only some dispatches of a family carry.
func (a *args) optInt(name graph.ConstName, def int) int {
	if v, ok := a.d.Const(name); ok {
		return int(v)
	}
	return def
}

func (a *args) scalar(name string) float64 {
	v, ok := a.d.Scalar(name)
	if !ok {
		a.fail(fmt.Errorf("missing scalar %q", name))
	}
	return v
}

// params reads the live row count and the position of row 0; rows is capped by
// the dispatch's own row count (1 for last-row-only tails).
type params struct {
	p   []uint32
	max int
}

func (a *args) params() params {
	return params{p: a.u32(graph.ParamsBuffer), max: a.int(graph.ConstRows)}
}

func (p params) rows() int { return min(int(p.p[graph.ParamRowsWord]), p.max) }
func (p params) pos() int  { return int(p.p[graph.ParamPosWord]) }
func (p params) token(t int) int {
	return int(p.p[graph.ParamTokensWord+t])
}
