package metal

import (
	"fmt"
	"time"

	"github.com/strata-llm/strata/graph"
)

// WindowStats is the telemetry of one window, or a sum of windows.
type WindowStats struct {
	// HostBefore is the host time between the previous window's return and
	// this one's start: sampling, params, n-gram gathers.
	HostBefore time.Duration
	Encode     time.Duration // encoding the command buffer, up to its commit
	Host       time.Duration // in the residency hook, over all host points
	GPU        time.Duration // GPUEndTime - GPUStartTime
	Wall       time.Duration // from the start of Run to the window's completion
	HostPoints int
	Replayed   int // commands run from the ICB
	Direct     int // dispatches encoded directly
}

func (s *WindowStats) add(o WindowStats) {
	s.HostBefore += o.HostBefore
	s.Encode += o.Encode
	s.Host += o.Host
	s.GPU += o.GPU
	s.Wall += o.Wall
	s.HostPoints += o.HostPoints
	s.Replayed += o.Replayed
	s.Direct += o.Direct
}

// Stats are the last window's telemetry and the sum over all windows.
type Stats struct {
	Windows int
	Last    WindowStats
	Total   WindowStats
}

func (s *Stats) add(w WindowStats) {
	s.Windows++
	s.Last = w
	s.Total.add(w)
}

// Stats is the telemetry of this program's windows.
func (p *Program) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Stats is the telemetry of every window the backend ran.
func (b *Backend) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stats
}

// Run executes one window: the host has written the params; when Run
// returns the outputs are in memory. It encodes the window into one command
// buffer, commits it, and then spins on the shared event, calling the
// residency hook at every host point and releasing the GPU after it.
func (p *Program) Run() error {
	return p.b.do(func() error { return p.run(p.b.opt.Residency) })
}

// RunHost is Run with host called at every host point instead of the
// backend's Residency hook (the engine's expert streaming, per window).
func (p *Program) RunHost(host func(graph.HostPoint) error) error {
	if host == nil {
		return p.Run()
	}
	return p.b.do(func() error { return p.run(hostFunc(host)) })
}

// hostFunc adapts a per-window host function to Residency.
type hostFunc func(graph.HostPoint) error

func (f hostFunc) MakeResident(_ *graph.Graph, hp graph.HostPoint) error { return f(hp) }

func (p *Program) run(res Residency) error {
	b, dev := p.b, p.b.dev
	if b.broken != nil {
		return fmt.Errorf("metal: an earlier window never finished: %w", b.broken)
	}
	if err := b.keep.finish(b); err != nil {
		b.broken = err
		return err
	}
	start := time.Now()
	var st WindowStats
	b.mu.Lock()
	if !b.lastEnd.IsZero() {
		st.HostBefore = start.Sub(b.lastEnd)
	}
	b.mu.Unlock()
	if err := dev.BeginWindow(); err != nil {
		return fmt.Errorf("metal: starting a window: %w", err)
	}
	defer dev.EndWindow()
	base := b.value
	final := base + 2*uint64(len(p.hosts))
	st.Replayed, st.Direct = p.encode(base)
	dev.Commit()
	st.Encode = time.Since(start)

	deadline := start.Add(b.opt.HostTimeout)
	var hookErr error
	for k, h := range p.hosts {
		signal := base + 2*uint64(k) + 1
		if err := p.spin(signal, deadline); err != nil {
			return p.abandon(final, deadline, fmt.Errorf("metal: window %s/T=%d, host point %d (layer %d): %w", p.Graph.Model, p.Graph.Rows, k, h.hp.Layer, err))
		}
		if hookErr == nil {
			t := time.Now()
			if err := res.MakeResident(p.Graph, h.hp); err != nil {
				hookErr = fmt.Errorf("metal: host point %d (layer %d): %w", k, h.hp.Layer, err)
			}
			st.Host += time.Since(t)
		}
		dev.SetSignaledValue(b.event, signal+1)
	}
	b.value = final
	st.HostPoints = len(p.hosts)
	if err := p.complete(deadline); err != nil {
		return err
	}
	st.GPU = dev.GPUTime()
	end := time.Now()
	st.Wall = end.Sub(start)
	b.keep.extend(b)
	p.mu.Lock()
	p.stats.add(st)
	p.mu.Unlock()
	b.mu.Lock()
	b.stats.add(st)
	b.lastEnd = end
	b.mu.Unlock()
	return hookErr
}

// spin waits, busily, for the GPU to signal value, checking now and then
// that the command buffer has not failed and the deadline has not passed.
func (p *Program) spin(value uint64, deadline time.Time) error {
	dev := p.b.dev
	for n := 1; ; n++ {
		if dev.SignaledValue(p.b.event) >= value {
			return nil
		}
		if n&1023 == 0 {
			if done, err := dev.Status(); done {
				if err != nil {
					return fmt.Errorf("the command buffer failed: %w", err)
				}
				return fmt.Errorf("the command buffer finished without signalling %d", value)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("no signal %d from the GPU in %v", value, p.b.opt.HostTimeout)
			}
		}
	}
}

// complete spins until the command buffer has finished. A buffer that
// never finishes leaves the backend broken: its waits may still be pending.
func (p *Program) complete(deadline time.Time) error {
	dev := p.b.dev
	for n := 1; ; n++ {
		done, err := dev.Status()
		if done {
			if err != nil {
				return fmt.Errorf("metal: window %s/T=%d failed on the GPU: %w", p.Graph.Model, p.Graph.Rows, err)
			}
			return nil
		}
		if n&1023 == 0 && time.Now().After(deadline) {
			p.b.broken = fmt.Errorf("metal: window %s/T=%d did not finish in %v", p.Graph.Model, p.Graph.Rows, p.b.opt.HostTimeout)
			return p.b.broken
		}
	}
}

// abandon releases every wait of a failed window so its command buffer can
// end, waits for it, and returns err.
func (p *Program) abandon(final uint64, deadline time.Time, err error) error {
	p.b.dev.SetSignaledValue(p.b.event, final)
	p.b.value = final
	_ = p.complete(deadline.Add(p.b.opt.HostTimeout))
	return err
}

// encode encodes the window with event values after base: one pass per
// stretch between events, a memory barrier exactly where the graph has one,
// a signal after each host point's router and a wait before its Wait
// dispatch. It returns how many commands ran from the ICB and directly.
func (p *Program) encode(base uint64) (replayed, direct int) {
	dev, ev := p.b.dev, p.b.event
	e := encoder{dev: dev, touched: map[Pipeline]bool{}}
	r := p.icb
	for i := 0; i < len(p.steps); {
		if k := p.waitBefore[i]; k >= 0 {
			e.endPass()
			dev.EncodeWait(ev, base+2*uint64(k)+2)
		}
		last := i
		if r != nil && r.runLen[i] > 0 {
			n := r.runLen[i]
			e.beginPass()
			if !e.resident {
				dev.UseResources(r.resources)
				e.resident = true
			}
			if p.b.info.ICBNeedsTouch {
				for _, pipe := range r.runPipes[i] {
					if !e.touched[pipe] {
						e.setPipeline(pipe)
						dev.Dispatch([3]int{}, [3]int{})
						e.touched[pipe] = true
					}
				}
			}
			if p.steps[i].barrier {
				dev.MemoryBarrier()
			}
			dev.ExecuteICB(r.icb, i, n)
			e.forget()
			replayed += n
			last = i + n - 1
		} else {
			e.dispatch(&p.steps[i])
			direct++
		}
		if k := p.signalAfter[last]; k >= 0 {
			e.endPass()
			dev.EncodeSignal(ev, base+2*uint64(k)+1)
		}
		i = last + 1
	}
	for _, k := range p.waitAtEnd {
		e.endPass()
		dev.EncodeWait(ev, base+2*uint64(k)+2)
	}
	e.endPass()
	return replayed, direct
}

// encoder tracks one pass's bound state so that unchanged pipelines and
// bindings are not set again (each call is an Objective-C message).
type encoder struct {
	dev      Commands
	open     bool
	resident bool              // useResources done in this pass
	touched  map[Pipeline]bool // pipelines dispatched in this pass before an ICB ran them
	pipe     Pipeline
	slots    [maxSlots]slotState
}

type slotState struct {
	set    bool
	buf    Buffer
	offset int64
	bytes  string // setBytes content when buf is 0
}

func (e *encoder) beginPass() {
	if !e.open {
		e.dev.BeginPass()
		e.open = true
		clear(e.touched)
	}
}

func (e *encoder) endPass() {
	if e.open {
		e.dev.EndPass()
		e.open, e.resident = false, false
		e.forget()
	}
}

// forget drops the tracked state: a new pass, or after an ICB execution,
// which leaves the encoder's bindings undefined.
func (e *encoder) forget() {
	e.pipe = 0
	e.slots = [maxSlots]slotState{}
}

func (e *encoder) setPipeline(p Pipeline) {
	if e.pipe != p {
		e.dev.SetPipeline(p)
		e.pipe = p
	}
}

func (e *encoder) dispatch(s *step) {
	e.beginPass()
	if s.barrier {
		e.dev.MemoryBarrier()
	}
	e.setPipeline(s.pipe)
	for _, bb := range s.binds {
		st := &e.slots[bb.Slot]
		if !st.set || st.buf != bb.Buffer || st.offset != bb.Offset {
			e.dev.SetBuffer(bb.Buffer, bb.Offset, bb.Slot)
			*st = slotState{set: true, buf: bb.Buffer, offset: bb.Offset}
		}
	}
	if s.args != nil {
		st := &e.slots[s.argsSlot]
		if !st.set || st.buf != 0 || st.bytes != s.argsKey {
			e.dev.SetBytes(s.args, s.argsSlot)
			*st = slotState{set: true, bytes: s.argsKey}
		}
	}
	e.dev.Dispatch(s.grid, s.tg)
}
