package cuda

import (
	"fmt"
	"slices"
	"time"

	"github.com/strata-llm/strata/graph"
)

// SetMode changes how later windows run: the schedule and whether they are
// replayed from recorded CUDA graphs.
func (b *Backend) SetMode(s Schedule, replay bool) {
	b.mu.Lock()
	b.opt.Schedule, b.opt.Direct = s, !replay
	b.mu.Unlock()
}

// Poison fills every buffer of a kind with 0xff bytes (NaN as float32): a
// kernel that reads scratch no dispatch of its window wrote then shows in
// the output, and a dropped barrier cannot hide behind the values an
// earlier window left.
func (m *Memory) Poison(kind string) {
	for i, l := range m.Layout() {
		if l.Kind == kind {
			b := m.Host(i)
			for j := range b {
				b[j] = 0xff
			}
			if m.mirror[i] != nil {
				if err := m.upload(i, uintptr(len(b))); err != nil {
					panic(fmt.Sprintf("cuda: poisoning buffer %s: %v", l.Name, err)) // a test helper: the device is gone
				}
			}
		}
	}
}

// Memory is the memory the program is bound to.
func (p *Program) Memory() *Memory { return p.mem }

// events returns n timing events of the program (made once).
func (p *Program) events(n int) ([]uintptr, error) {
	d := p.b.d
	for len(p.timers) < n {
		var e uintptr
		if err := d.check("cuEventCreate", d.eventCreate(&e, 0)); err != nil {
			return nil, err
		}
		p.timers = append(p.timers, e)
	}
	return p.timers[:n], nil
}

// timed runs launch between two events on the main stream (ev[0], ev[1])
// and returns the GPU time between them, waiting for the second.
func (p *Program) timed(ev []uintptr, launch func() error) (time.Duration, error) {
	d := p.b.d
	if err := d.check("cuEventRecord", d.eventRecord(ev[0], p.main)); err != nil {
		return 0, err
	}
	if err := launch(); err != nil {
		return 0, err
	}
	if err := d.check("cuEventRecord", d.eventRecord(ev[1], p.main)); err != nil {
		return 0, err
	}
	if err := d.check("cuEventSynchronize", d.eventSynchronize(ev[1])); err != nil {
		return 0, err
	}
	var ms float32
	if err := d.check("cuEventElapsedTime", d.eventElapsedTime(&ms, ev[0], ev[1])); err != nil {
		return 0, err
	}
	return time.Duration(float64(ms) * 1e6), nil
}

// Time runs the window warm+reps times under sched (replayed from CUDA
// graphs with replay), host points passing by, and returns the GPU time of
// each timed run, measured by events on the main stream around the window,
// sorted.
func (p *Program) Time(sched Schedule, replay bool, warm, reps int) ([]time.Duration, error) {
	var out []time.Duration
	err := p.b.do(func() error {
		d := p.b.d
		ev, err := p.events(2)
		if err != nil {
			return err
		}
		var execs []uintptr
		if replay {
			if execs, err = p.record(sched); err != nil {
				return err
			}
		}
		if err := p.uploadParams(); err != nil {
			return err
		}
		for r := 0; r < warm+reps; r++ {
			t, err := p.timed(ev, func() error {
				if !replay {
					return p.encode(0, len(p.steps), sched)
				}
				for _, e := range execs {
					if err := d.check("cuGraphLaunch", d.graphLaunch(e, p.main)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			if r >= warm {
				out = append(out, t)
			}
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// DispatchTimes runs the window serially reps times with an event between
// every two dispatches and returns each dispatch's median GPU time.
func (p *Program) DispatchTimes(reps int) ([]time.Duration, error) {
	n := len(p.steps)
	all := make([][]time.Duration, n)
	err := p.b.do(func() error {
		d := p.b.d
		ev, err := p.events(n + 1)
		if err != nil {
			return err
		}
		if err := p.uploadParams(); err != nil {
			return err
		}
		for r := 0; r < reps+1; r++ {
			for i := 0; i < n; i++ {
				if err := d.check("cuEventRecord", d.eventRecord(ev[i], p.main)); err != nil {
					return err
				}
				if err := p.launch(i, p.main); err != nil {
					return err
				}
			}
			if err := d.check("cuEventRecord", d.eventRecord(ev[n], p.main)); err != nil {
				return err
			}
			if err := d.check("cuEventSynchronize", d.eventSynchronize(ev[n])); err != nil {
				return err
			}
			if r == 0 {
				continue // warm-up
			}
			for i := 0; i < n; i++ {
				var ms float32
				if err := d.check("cuEventElapsedTime", d.eventElapsedTime(&ms, ev[i], ev[i+1])); err != nil {
					return err
				}
				all[i] = append(all[i], time.Duration(float64(ms)*1e6))
			}
		}
		return nil
	})
	out := make([]time.Duration, n)
	for i, ts := range all {
		if len(ts) > 0 {
			slices.Sort(ts)
			out[i] = ts[len(ts)/2]
		}
	}
	return out, err
}

// DeclaredBytes is what dispatch i declares it reads plus writes (a whole
// buffer where a range is the whole of it).
func (p *Program) DeclaredBytes(i int) int64 {
	d := &p.Graph.Dispatches[i]
	var n int64
	for _, r := range append(append([]graph.Range{}, d.Reads...), d.Writes...) {
		if r.Offset == 0 && r.Size == 0 {
			n += int64(len(p.mem.Buffer(r.Buffer)))
		} else {
			n += r.Size
		}
	}
	return n
}

// Pipeline describes dispatch i's compiled pipeline: registers per thread,
// static shared memory and local (spill) memory per thread in bytes.
func (p *Program) Pipeline(i int) (regs, shared, local int) {
	s := p.steps[i].pipe
	return s.regs, s.shared, s.local
}

// CopyBandwidth is a device-to-device copy of size bytes, timed reps times
// with events (after one warm-up): bytes read plus written per second, the
// median.
func (b *Backend) CopyBandwidth(size int64, reps int) (float64, error) {
	var rates []float64
	err := b.do(func() error {
		d := b.d
		var src, dst, s, e0, e1 uintptr
		if err := d.check("cuMemAlloc", d.memAlloc(&src, uintptr(size))); err != nil {
			return err
		}
		defer d.memFree(src)
		if err := d.check("cuMemAlloc", d.memAlloc(&dst, uintptr(size))); err != nil {
			return err
		}
		defer d.memFree(dst)
		if err := d.check("cuStreamCreate", d.streamCreate(&s, streamNonBlocking)); err != nil {
			return err
		}
		defer d.streamDestroy(s)
		d.eventCreate(&e0, 0)
		d.eventCreate(&e1, 0)
		defer d.eventDestroy(e0)
		defer d.eventDestroy(e1)
		if err := d.check("cuMemsetD8Async", d.memsetD8Async(src, 0x3c, uintptr(size), s)); err != nil {
			return err
		}
		for r := 0; r <= reps; r++ {
			d.eventRecord(e0, s)
			if err := d.check("cuMemcpyDtoDAsync", d.memcpyDtoDAsync(dst, src, uintptr(size), s)); err != nil {
				return err
			}
			d.eventRecord(e1, s)
			if err := d.check("cuEventSynchronize", d.eventSynchronize(e1)); err != nil {
				return err
			}
			var ms float32
			d.eventElapsedTime(&ms, e0, e1)
			if r > 0 && ms > 0 {
				rates = append(rates, 2*float64(size)/(float64(ms)/1e3))
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if len(rates) == 0 {
		return 0, fmt.Errorf("cuda: no copy timed")
	}
	slices.Sort(rates)
	return rates[len(rates)/2], nil
}

// ReplayedDispatchTimes times each dispatch the way a replayed window runs
// it: a CUDA graph of repeats launches of that dispatch alone, one
// after another on one stream (each waits for the one before, as a kernel
// after a barrier does), replayed reps times after a warm-up; the median
// per launch. Unlike DispatchTimes, the host's launch calls are not in it,
// only the GPU's own gap between dependent kernels. Dispatches that update
// state in place (caches, recurrent state, residual streams) run
// repeats times over their own output: the times hold, the values
// after a profile do not.
func (p *Program) ReplayedDispatchTimes(repeats, reps int) ([]time.Duration, error) {
	n := len(p.steps)
	out := make([]time.Duration, n)
	err := p.b.do(func() error {
		d := p.b.d
		ev, err := p.events(2)
		if err != nil {
			return err
		}
		if err := p.uploadParams(); err != nil {
			return err
		}
		for i := 0; i < n; i++ {
			g, err := p.capture(func() error {
				for range repeats {
					if err := p.launch(i, p.main); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			var exec uintptr
			err = d.check("cuGraphInstantiate", d.graphInstantiate(&exec, g, 0))
			d.graphDestroy(g)
			if err != nil {
				return err
			}
			var ts []time.Duration
			for r := 0; r < reps+1 && err == nil; r++ {
				var t time.Duration
				t, err = p.timed(ev, func() error { return d.check("cuGraphLaunch", d.graphLaunch(exec, p.main)) })
				if r > 0 { // the first is a warm-up
					ts = append(ts, t/time.Duration(repeats))
				}
			}
			d.graphExecDestroy(exec)
			if err != nil {
				return err
			}
			slices.Sort(ts)
			out[i] = ts[len(ts)/2]
		}
		return nil
	})
	return out, err
}
