package mslemu

import (
	"fmt"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Program is a window graph bound to a Memory: one prepared dispatch per
// graph dispatch, run in graph order (one at a time, so barrier groups need
// no more than order).
type Program struct {
	e     *Emulator
	mem   *Memory
	g     *graph.Graph
	steps []step
	after map[int][]graph.HostPoint // host points by the dispatch they follow
}

type step struct {
	index int
	d     *graph.Dispatch
	c     cDispatch
	args  []byte // the argument struct, 16-byte aligned; kept alive for c.Bufs
	// For the sanitizer process: buffer slots as (buffer + 1) << 48 | offset,
	// and every range the dispatch declares.
	remote [maxSlots]uint64
	ranges []remoteRange
}

type remoteRange struct {
	buf       uint32
	off, size uint64
}

var _ backend.HostProgram = (*Program)(nil)

// argsRef marks the argument-struct slot for the sanitizer process.
const argsRef = ^uint64(0)

// Compile binds every dispatch of g to mem (a Memory of this emulator),
// checking each against the model's kernel metadata
// (artifact.Artifact.CheckDispatch) and the emulator's own limits: the
// constants and slots it passes, the threadgroup it runs.
func (e *Emulator) Compile(g *graph.Graph, mem backend.Memory) (backend.Program, error) {
	m, ok := mem.(*Memory)
	if !ok {
		return nil, fmt.Errorf("mslemu: memory of type %T, not from this backend", mem)
	}
	tgmem := e.built.tgmem
	p := &Program{e: e, mem: m, g: g, after: map[int][]graph.HostPoint{}}
	for _, hp := range g.HostPoints {
		p.after[hp.After] = append(p.after[hp.After], hp)
	}
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		s, err := e.prepare(g, d, m, tgmem)
		if err != nil {
			return nil, fmt.Errorf("mslemu: dispatch %d (%s, layer %d): %w", i, d.Kernel, d.Layer, err)
		}
		s.index = i
		p.steps = append(p.steps, s)
	}
	return p, nil
}

func (e *Emulator) prepare(g *graph.Graph, d *graph.Dispatch, m *Memory, tgmem [][][2]uint64) (step, error) {
	s := step{d: d}
	l, err := e.model.CheckDispatch(g, d) // kernel, bindings, constants, argument struct
	if err != nil {
		return s, err
	}
	k, ki := l.Kernel, e.kernels[d.Kernel]
	c := &s.c
	c.Kernel = int32(ki)

	// Function constants: the ones the kernel's code reads.
	values := map[int]int64{}
	for _, v := range l.Pipeline.Values {
		values[v.Index] = v.Value
	}
	for _, idx := range k.Constants {
		v, given := values[idx]
		if !given { // optional (CheckDispatch)
			continue
		}
		if c.NConst == maxConsts {
			return s, fmt.Errorf("kernel %s reads more than %d function constants", k.Name, maxConsts)
		}
		c.ConstIndex[c.NConst] = int32(idx)
		c.ConstValue[c.NConst] = uint32(v)
		c.NConst++
	}

	// Buffers at their slots.
	for i, a := range d.Args {
		bi, err := m.Locate(a.Range)
		if err != nil {
			return s, fmt.Errorf("binding %s: %w", a.Name, err)
		}
		buf := m.Host(bi)
		if a.Offset >= 1<<48 {
			return s, fmt.Errorf("binding %s: offset %d past 2^48", a.Name, a.Offset)
		}
		if a.Offset < int64(len(buf)) {
			c.Bufs[i] = uint64(uintptr(unsafe.Pointer(&buf[a.Offset])))
		}
		s.remote[i] = uint64(bi+1)<<48 | uint64(a.Offset)
		s.ranges = append(s.ranges, remoteRangeOf(m, bi, a.Range))
	}
	for _, r := range append(append([]graph.Range{}, d.Reads...), d.Writes...) {
		if bi, ok := m.Index(r.Buffer); ok {
			s.ranges = append(s.ranges, remoteRangeOf(m, bi, r))
		}
	}

	// The argument struct, at the slot after the last buffer.
	if args := l.Args; k.ArgsSlot >= 0 {
		if k.ArgsSlot >= maxSlots {
			return s, fmt.Errorf("argument struct at slot %d", k.ArgsSlot)
		}
		words := make([]uint64, (len(args)+7)/8+2)
		base := uintptr(unsafe.Pointer(&words[0]))
		skip := int(-base & 15)
		s.args = unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)[skip : skip+len(args)]
		copy(s.args, args)
		c.Bufs[k.ArgsSlot] = uint64(uintptr(unsafe.Pointer(&s.args[0])))
		s.remote[k.ArgsSlot] = argsRef
	}

	// Grid and threadgroup.
	threads := 1
	for a := 0; a < 3; a++ {
		if d.Grid[a] < 1 || d.Threadgroup[a] < 1 || d.Grid[a] > 1<<31 {
			return s, fmt.Errorf("grid %v of threadgroups %v", d.Grid, d.Threadgroup)
		}
		c.Grid[a] = uint32(d.Grid[a])
		c.TG[a] = uint32(d.Threadgroup[a])
		threads *= d.Threadgroup[a]
	}
	if threads > 1024 {
		return s, fmt.Errorf("threadgroup %v of %d threads, more than 1024", d.Threadgroup, threads)
	}
	c.NTGMem = int32(copy(c.TGMem[:], tgmem[ki]))
	return s, nil
}

func remoteRangeOf(m *Memory, bi int, r graph.Range) remoteRange {
	if r.Offset == 0 && r.Size == 0 {
		return remoteRange{buf: uint32(bi), size: uint64(len(m.Host(bi)))}
	}
	return remoteRange{buf: uint32(bi), off: uint64(r.Offset), size: uint64(r.Size)}
}

// Run executes the window once: every dispatch in graph order. The host
// points pass by (every expert is resident).
func (p *Program) Run() error { return p.RunHost(nil) }

// RunHost is Run calling host at every host point, right after the
// dispatch it follows (its layer's router): dispatches run in graph order,
// so everything the routed experts read is written by then.
func (p *Program) RunHost(host func(graph.HostPoint) error) error {
	return p.runSteps(0, len(p.steps), host)
}

var _ backend.SegmentedProgram = (*Program)(nil)

// RunSegment runs the dispatches after host point k-1's router through host
// point k's router and calls host there (k = len(HostPoints): the
// dispatches after the last router).
func (p *Program) RunSegment(k int, host func(graph.HostPoint) error) error {
	lo, hi, err := backend.SegmentBounds(p.g.HostPoints, k, len(p.steps))
	if err != nil {
		return fmt.Errorf("mslemu: %w", err)
	}
	return p.runSteps(lo, hi, host)
}

// runSteps runs dispatches [lo, hi), calling host at the host points that
// follow them.
func (p *Program) runSteps(lo, hi int, host func(graph.HostPoint) error) error {
	if p.mem.Dropped() {
		return fmt.Errorf("mslemu: the memory of this program was closed")
	}
	lib := p.e.lib
	if p.mem.child == nil {
		// Host calls happen between dispatches, with the library held: the
		// host only reads ids and writes the arena.
		lib.mu.Lock()
		defer lib.mu.Unlock()
	}
	for i := lo; i < hi; i++ {
		s := &p.steps[i]
		if p.mem.child != nil {
			if err := p.mem.child.run(s); err != nil {
				return p.fail(s, err.Error())
			}
		} else if lib.dispatch(&s.c) != 0 {
			return p.fail(s, s.c.err())
		}
		if host == nil {
			continue
		}
		for _, hp := range p.after[i] {
			if err := host(hp); err != nil {
				return fmt.Errorf("mslemu: host point of layer %d: %w", hp.Layer, err)
			}
		}
	}
	return nil
}

func (p *Program) fail(s *step, why string) error {
	return fmt.Errorf("mslemu: %s window T=%d, dispatch %d (%s, layer %d): %s", p.g.Kind, p.g.Rows, s.index, s.d.Kernel, s.d.Layer, why)
}
