package metal

import (
	"fmt"
	"slices"
	"sync"

	"github.com/strata-llm/strata/graph"
)

// maxSlots is the size of Metal's buffer argument table.
const maxSlots = 31

// Program is a window graph bound to a backend's pipelines and memory,
// ready to run one window at a time.
type Program struct {
	Graph *graph.Graph
	b     *Backend
	mem   *Memory
	steps []step
	hosts []hostPoint
	// per dispatch: the host point whose signal follows it / whose wait
	// precedes it, or -1
	signalAfter, waitBefore []int
	waitAtEnd               []int // host points nothing waits for inside the window
	icb                     *icbReplay

	mu    sync.Mutex
	stats Stats
}

// step is one dispatch, resolved to Metal objects.
type step struct {
	pipe     Pipeline
	binds    []BufferBinding // by slot
	args     []byte          // argument struct, nil if none
	argsKey  string          // args as a string, to compare without allocating
	argsSlot int
	grid, tg [3]int
	barrier  bool
}

type hostPoint struct {
	hp   graph.HostPoint
	wait int // the dispatch the GPU waits before; len(dispatches): at the end
}

// icbReplay is a window shape recorded into an ICB.
type icbReplay struct {
	icb       ICB
	args      Buffer // the static argument buffer of the plan
	runLen    []int  // per dispatch: the length of the run starting there, or 0
	replay    []bool
	resources []Buffer           // every buffer a replayed command binds
	runPipes  map[int][]Pipeline // per run (by first command): its distinct pipelines
}

// Compile binds g to the backend's pipelines (built now for every function
// the graph uses) and to mem, after checking the guards: threads per
// threadgroup against the limits and each pipeline's own maximum, grid
// sizes, binding slots. With Options.ICB it records the graph's ICB plan.
func (b *Backend) Compile(g *graph.Graph, mem *Memory) (*Program, error) {
	if mem == nil || mem.b != b {
		return nil, fmt.Errorf("graph %s/T=%d: memory of another backend", g.Model, g.Rows)
	}
	if err := g.Check(); err != nil {
		return nil, err
	}
	where := fmt.Sprintf("graph %s/T=%d", g.Model, g.Rows)
	if err := checkGuards(g.Dispatches, b.opt.Limits); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	p := &Program{Graph: g, b: b, mem: mem, steps: make([]step, len(g.Dispatches))}
	if err := p.placeHostPoints(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	funcs := make([]Function, len(g.Dispatches))
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		f, err := b.kernels.Resolve(d)
		if err != nil {
			return nil, fmt.Errorf("%s: dispatch %d (%s, layer %d): %w", where, i, d.Kernel, d.Layer, err)
		}
		if err := f.check(); err != nil {
			return nil, fmt.Errorf("%s: dispatch %d (%s, layer %d): %w", where, i, d.Kernel, d.Layer, err)
		}
		funcs[i] = f
		if err := p.bind(i, d); err != nil {
			return nil, fmt.Errorf("%s: dispatch %d (%s, layer %d): %w", where, i, d.Kernel, d.Layer, err)
		}
	}
	var plan *graph.ICBPlan
	if b.opt.ICB {
		if g.ICB == nil {
			return nil, fmt.Errorf("%s: ICB replay is on, but the graph has no ICB plan", where)
		}
		if err := p.checkPlan(g.ICB); err != nil {
			return nil, fmt.Errorf("%s: ICB plan: %w", where, err)
		}
		plan = g.ICB
	}
	err := b.do(func() error {
		for i := range p.steps {
			e, err := b.pipeline(funcs[i])
			if err != nil {
				return fmt.Errorf("dispatch %d (%s, layer %d): %w", i, g.Dispatches[i].Kernel, g.Dispatches[i].Layer, err)
			}
			tg := p.steps[i].tg
			if threads := tg[0] * tg[1] * tg[2]; threads > e.info.MaxTotalThreadsPerThreadgroup {
				return &graph.GuardError{Dispatch: i, Kernel: g.Dispatches[i].Kernel, Layer: g.Dispatches[i].Layer,
					Problem: fmt.Sprintf("%d threads per threadgroup %v, its pipeline allows %d", threads, tg, e.info.MaxTotalThreadsPerThreadgroup)}
			}
			p.steps[i].pipe = e.p
		}
		if plan != nil {
			return p.record(plan)
		}
		return nil
	})
	if err != nil {
		p.release()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	mem.sealed = true
	b.mu.Lock()
	b.programs = append(b.programs, p)
	b.mu.Unlock()
	return p, nil
}

// checkGuards applies the graph's guards and the grid limit (a graph that
// skipped grid chunking would lose threadgroups silently on the GPU).
func checkGuards(ds []graph.Dispatch, lim graph.Limits) error {
	if err := graph.CheckGuards(ds, lim); err != nil {
		return err
	}
	for i := range ds {
		d := &ds[i]
		if n := int64(d.Grid[0]) * int64(d.Grid[1]) * int64(d.Grid[2]); n > lim.MaxThreadgroupsPerGrid {
			return &graph.GuardError{Dispatch: i, Kernel: d.Kernel, Layer: d.Layer,
				Problem: fmt.Sprintf("grid %v of %d threadgroups, over the %d a dispatch may have (the graph was not chunked)", d.Grid, n, lim.MaxThreadgroupsPerGrid)}
		}
	}
	return nil
}

// placeHostPoints fixes where each host point signals and waits.
func (p *Program) placeHostPoints() error {
	n := len(p.Graph.Dispatches)
	p.signalAfter = make([]int, n)
	p.waitBefore = make([]int, n)
	for i := range p.signalAfter {
		p.signalAfter[i], p.waitBefore[i] = -1, -1
	}
	for k, h := range p.Graph.HostPoints {
		wait := h.Wait
		if wait == 0 { // not placed by the passes: wait right after the signal
			wait = h.After + 1
		}
		if p.signalAfter[h.After] >= 0 {
			return fmt.Errorf("host points %d and %d both signal after dispatch %d", p.signalAfter[h.After], k, h.After)
		}
		p.signalAfter[h.After] = k
		if wait < n {
			if p.waitBefore[wait] >= 0 {
				return fmt.Errorf("host points %d and %d both wait before dispatch %d", p.waitBefore[wait], k, wait)
			}
			p.waitBefore[wait] = k
		} else {
			p.waitAtEnd = append(p.waitAtEnd, k)
		}
		p.hosts = append(p.hosts, hostPoint{hp: h, wait: wait})
	}
	return nil
}

// bind resolves a dispatch's bindings and argument struct.
func (p *Program) bind(i int, d *graph.Dispatch) error {
	s := &p.steps[i]
	s.grid, s.tg, s.barrier = d.Grid, d.Threadgroup, d.Barrier
	for _, a := range d.Args {
		bi, err := p.mem.Locate(a.Range)
		if err != nil {
			return fmt.Errorf("binding %s: %w", a.Name, err)
		}
		h := p.mem.handles[bi]
		if h == 0 {
			return fmt.Errorf("binding %s: %s buffer %s was never wrapped", a.Name, p.mem.Layout()[bi].Kind, a.Buffer)
		}
		s.binds = append(s.binds, BufferBinding{Buffer: h, Offset: a.Offset, Slot: a.Slot})
		s.argsSlot = max(s.argsSlot, a.Slot+1)
	}
	args, err := p.b.kernels.Args(d)
	if err != nil {
		return fmt.Errorf("argument struct: %w", err)
	}
	if len(args) > 0 {
		if s.argsSlot >= maxSlots {
			return fmt.Errorf("no slot left for the argument struct after slot %d", s.argsSlot-1)
		}
		s.args, s.argsKey = args, string(args)
	}
	return nil
}

// checkPlan verifies that an ICB plan fits the graph as it is: a command per
// dispatch with its barrier bit, argument blocks where the dispatch has an
// argument struct, and runs that cover exactly the replayable commands and
// cross no host signal or wait (events sit between ICB executions).
func (p *Program) checkPlan(plan *graph.ICBPlan) error {
	ds := p.Graph.Dispatches
	if len(plan.Commands) != len(ds) {
		return fmt.Errorf("%d commands for %d dispatches", len(plan.Commands), len(ds))
	}
	cut := make([]bool, len(ds)+1)
	for _, h := range p.hosts {
		cut[h.hp.After+1] = true
		cut[h.wait] = true
	}
	covered := make([]bool, len(ds))
	next := 0
	for _, r := range plan.Runs {
		if r.Count < 1 || r.First < next || r.First+r.Count > len(ds) {
			return fmt.Errorf("run [%d,+%d) overlaps, is empty or out of range", r.First, r.Count)
		}
		for i := r.First; i < r.First+r.Count; i++ {
			if !plan.Commands[i].Replay {
				return fmt.Errorf("run [%d,+%d) holds command %d, which does not replay", r.First, r.Count, i)
			}
			if i > r.First && cut[i] {
				return fmt.Errorf("run [%d,+%d) crosses a host signal or wait at command %d", r.First, r.Count, i)
			}
			covered[i] = true
		}
		next = r.First + r.Count
	}
	for i, c := range plan.Commands {
		d := &ds[i]
		if c.Barrier != d.Barrier {
			return fmt.Errorf("command %d has barrier bit %v, dispatch %d has %v", i, c.Barrier, i, d.Barrier)
		}
		if c.Replay != covered[i] {
			return fmt.Errorf("command %d replays=%v but is in a run=%v", i, c.Replay, covered[i])
		}
		s := &p.steps[i]
		switch {
		case c.Args == nil && s.args != nil:
			return fmt.Errorf("command %d has no argument block for dispatch %d's argument struct", i, i)
		case c.Args != nil && s.args == nil:
			return fmt.Errorf("command %d has an argument block, dispatch %d has no argument struct", i, i)
		case c.Args != nil:
			if c.Args.Slot != s.argsSlot || c.Args.Size != int64(len(s.args)) || c.Args.Offset < 0 || c.Args.Offset+c.Args.Size > plan.ArgsSize {
				return fmt.Errorf("command %d: argument block at slot %d [%d,+%d) of %d, the dispatch needs slot %d and %d bytes", i, c.Args.Slot, c.Args.Offset, c.Args.Size, plan.ArgsSize, s.argsSlot, len(s.args))
			}
		}
		if c.Replay {
			for _, a := range d.Args {
				if a.Offset >= 1<<32 {
					return fmt.Errorf("command %d replays, but binding %s is at offset %d, past what an indirect command records", i, a.Name, a.Offset)
				}
			}
		}
	}
	return nil
}

// record fills the ICB from the plan, once. It runs on the backend's thread.
func (p *Program) record(plan *graph.ICBPlan) error {
	dev := p.b.dev
	r := &icbReplay{runLen: make([]int, len(p.steps)), replay: make([]bool, len(p.steps)), runPipes: map[int][]Pipeline{}}
	p.icb = r
	var err error
	if plan.ArgsSize > 0 {
		var host []byte
		if r.args, host, err = dev.NewBuffer(fmt.Sprintf("args %s/T=%d", p.Graph.Model, p.Graph.Rows), plan.ArgsSize); err != nil {
			return fmt.Errorf("argument buffer: %w", err)
		}
		for i, c := range plan.Commands {
			if c.Args != nil && host != nil {
				copy(host[c.Args.Offset:c.Args.Offset+c.Args.Size], p.steps[i].args)
			}
		}
	}
	if r.icb, err = dev.NewICB(len(p.steps)); err != nil {
		return fmt.Errorf("indirect command buffer of %d commands: %w", len(p.steps), err)
	}
	seenBuf := map[Buffer]bool{}
	for _, run := range plan.Runs {
		r.runLen[run.First] = run.Count
		var pipes []Pipeline
		for i := run.First; i < run.First+run.Count; i++ {
			if !slices.Contains(pipes, p.steps[i].pipe) {
				pipes = append(pipes, p.steps[i].pipe)
			}
		}
		r.runPipes[run.First] = pipes
	}
	for i, c := range plan.Commands {
		if !c.Replay {
			continue
		}
		s := &p.steps[i]
		r.replay[i] = true
		cmd := ICBCommand{Pipeline: s.pipe, Grid: s.grid, Threadgroup: s.tg, Barrier: c.Barrier}
		cmd.Buffers = append(cmd.Buffers, s.binds...)
		if c.Args != nil {
			cmd.Buffers = append(cmd.Buffers, BufferBinding{Buffer: r.args, Offset: c.Args.Offset, Slot: c.Args.Slot})
		}
		dev.EncodeICB(r.icb, i, cmd)
		for _, bb := range cmd.Buffers {
			if !seenBuf[bb.Buffer] {
				seenBuf[bb.Buffer] = true
				r.resources = append(r.resources, bb.Buffer)
			}
		}
	}
	return nil
}

// release drops the program's own objects (the ICB and its argument buffer).
func (p *Program) release() {
	if p.icb == nil {
		return
	}
	r := p.icb
	p.icb = nil
	_ = p.b.do(func() error {
		for _, h := range []uintptr{uintptr(r.icb), uintptr(r.args)} {
			if h != 0 {
				p.b.dev.Release(h)
			}
		}
		return nil
	})
}
