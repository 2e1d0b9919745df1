package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Program is a window graph bound to a Memory: one prepared launch per
// dispatch, the graph's barriers, its host points, and (replayed) the CUDA
// graphs recorded from it.
type Program struct {
	Graph *graph.Graph
	b     *Backend
	mem   *Memory
	steps []step
	// barrier[i]: dispatch i waits for every earlier one (the graph's
	// barriers; DropBarrier removes one for the soundness check).
	barrier []bool
	hosts   []graph.HostPoint
	// per boundary (0…n): the host point whose signal is written there /
	// whose release is awaited there, or -1.
	signalAt, waitAt []int
	cuts             []int // segment starts for replay and host points, ascending, with n last

	main   uintptr
	side   []uintptr
	fork   uintptr
	join   []uintptr
	timers []uintptr // timing events
	// flags are page-locked host words, stride per host point: its signal,
	// its release and, on a checked run, what the GPU's check wrote
	// (hostcheck.go).
	flags   []uint32
	flagsDV uintptr // their device address
	stride  int
	seq     uint32
	checks  []checkLaunch // per host point, once RunChecked has run
	checkFn uintptr

	// params is the params buffer's index in the memory and paramBytes
	// how much of it this window reads: copied from the host mirror to the
	// device first thing every window (params < 0: not mirrored).
	params     int
	paramBytes uintptr

	replays map[Schedule][]uintptr // per schedule: one CUDA graph exec per segment
	graphs  []uintptr
	// GraphNodes and GraphEdges count the recorded graphs' kernels and
	// dependency edges (the last schedule recorded).
	GraphNodes, GraphEdges int
}

type step struct {
	pipe     *pipeline
	grid, tg [3]uint32
	vals     []uintptr        // device addresses of the buffer slots
	args     []byte           // the argument struct
	params   []unsafe.Pointer // cuLaunchKernel's kernelParams: &vals[i]…, &args[0]
}

var _ backend.HostProgram = (*Program)(nil)

// Compile binds g to mem, checking every dispatch against the kernel
// metadata (kernel of the dispatch's family, bindings at their slots,
// constants, argument struct size, threadgroup size, CUDA's grid limits),
// and compiles the pipelines it needs.
func (b *Backend) Compile(g *graph.Graph, mem backend.Memory) (backend.Program, error) {
	p, err := b.compile(g, mem)
	if err != nil {
		return nil, err
	}
	return p, nil
}

func (b *Backend) compile(g *graph.Graph, mem backend.Memory) (*Program, error) {
	m, ok := mem.(*Memory)
	if !ok || m.b != b {
		return nil, fmt.Errorf("cuda: memory of type %T, not from this backend", mem)
	}
	if err := g.Check(); err != nil {
		return nil, err
	}
	where := fmt.Sprintf("cuda: %s window T=%d", g.Kind, g.Rows)
	n := len(g.Dispatches)
	p := &Program{Graph: g, b: b, mem: m, steps: make([]step, n), barrier: make([]bool, n), hosts: g.HostPoints, replays: map[Schedule][]uintptr{}}
	want := map[string]pipeSpec{}
	keys := make([]string, n)
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		p.barrier[i] = i == 0 || d.Barrier
		key, spec, err := p.bind(i, d)
		if err != nil {
			return nil, fmt.Errorf("%s: dispatch %d (%s, layer %d): %w", where, i, d.Kernel, d.Layer, err)
		}
		if old, ok := want[key]; ok {
			spec.maxThreads = max(spec.maxThreads, old.maxThreads)
		}
		want[key], keys[i] = spec, key
	}
	p.params = -1
	if i, ok := m.Index(graph.ParamsBuffer); ok && m.mirror[i] != nil {
		p.params = i
		for _, f := range g.Params {
			p.paramBytes = max(p.paramBytes, uintptr(f.Offset+4*int64(f.Count)))
		}
		p.paramBytes = min(p.paramBytes, uintptr(len(m.Host(i))))
	}
	if err := p.placeHostPoints(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := b.build(want); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	err := b.do(func() error {
		for i := range p.steps {
			p.steps[i].pipe = b.pipes[keys[i]]
		}
		return p.create()
	})
	if err != nil {
		p.release()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	b.mu.Lock()
	b.programs = append(b.programs, p)
	b.mu.Unlock()
	return p, nil
}

// bind prepares dispatch i's launch and names its pipeline.
func (p *Program) bind(i int, d *graph.Dispatch) (string, pipeSpec, error) {
	b := p.b
	l, err := b.model.CheckDispatch(p.Graph, d) // kernel, bindings, constants, argument struct
	if err != nil {
		return "", pipeSpec{}, err
	}
	k, pl := l.Kernel, l.Pipeline
	values := map[int]int64{}
	for _, v := range pl.Values {
		values[v.Index] = v.Value
	}
	kept := map[int]int64{}
	for _, idx := range k.Constants {
		if v, given := values[idx]; given { // else optional (CheckDispatch)
			kept[idx] = v
		}
	}
	s := &p.steps[i]
	s.vals = make([]uintptr, len(d.Args))
	for j, a := range d.Args {
		if _, err := p.mem.Locate(a.Range); err != nil {
			return "", pipeSpec{}, fmt.Errorf("binding %s: %w", a.Name, err)
		}
		if s.vals[j], err = p.mem.ptr(a.Buffer, a.Offset); err != nil {
			return "", pipeSpec{}, fmt.Errorf("binding %s: %w", a.Name, err)
		}
	}
	args := l.Args
	s.args = args
	for j := range s.vals {
		s.params = append(s.params, unsafe.Pointer(&s.vals[j]))
	}
	if len(args) > 0 {
		s.params = append(s.params, unsafe.Pointer(&s.args[0]))
	}
	if len(s.params) == 0 {
		return "", pipeSpec{}, fmt.Errorf("kernel %s takes no arguments", k.Name)
	}
	threads := 1
	limits := [3]int{1<<31 - 1, 65535, 65535}
	for a := 0; a < 3; a++ {
		if d.Grid[a] < 1 || d.Threadgroup[a] < 1 || d.Grid[a] > limits[a] {
			return "", pipeSpec{}, fmt.Errorf("grid %v of threadgroups %v (CUDA allows %v)", d.Grid, d.Threadgroup, limits)
		}
		s.grid[a], s.tg[a] = uint32(d.Grid[a]), uint32(d.Threadgroup[a])
		threads *= d.Threadgroup[a]
	}
	if threads > 1024 {
		return "", pipeSpec{}, fmt.Errorf("threadgroup %v of %d threads, more than 1024", d.Threadgroup, threads)
	}
	pl.Kernel = k.Name
	key := pipelineKey(pl, k, threads)
	return key, pipeSpec{kernel: k, values: kept, maxThreads: threads}, nil
}

// placeHostPoints fixes the boundary each host point signals at (right
// after its router) and the one where the GPU waits for the host (its Wait,
// or right after the signal when the passes placed none).
func (p *Program) placeHostPoints() error {
	n := len(p.steps)
	p.signalAt, p.waitAt = make([]int, n+1), make([]int, n+1)
	for i := range p.signalAt {
		p.signalAt[i], p.waitAt[i] = -1, -1
	}
	cut := map[int]bool{n: true}
	for k, h := range p.hosts {
		wait := h.Wait
		if wait == 0 {
			wait = h.After + 1
		}
		at := h.After + 1
		if p.signalAt[at] >= 0 || p.waitAt[wait] >= 0 {
			return fmt.Errorf("host points %d and %d share a signal or a wait", k, max(p.signalAt[at], p.waitAt[wait]))
		}
		p.signalAt[at], p.waitAt[wait] = k, k
		cut[at], cut[wait] = true, true
	}
	for i := 1; i <= n; i++ {
		if cut[i] {
			p.cuts = append(p.cuts, i)
		}
	}
	return nil
}

// create makes the streams, events and host words (on the backend's thread).
func (p *Program) create() error {
	d := p.b.d
	if err := d.check("cuStreamCreate", d.streamCreate(&p.main, streamNonBlocking)); err != nil {
		return err
	}
	if err := d.check("cuEventCreate", d.eventCreate(&p.fork, eventDisableTiming)); err != nil {
		return err
	}
	for s := 1; s < p.b.opt.Streams; s++ {
		var st, ev uintptr
		if err := d.check("cuStreamCreate", d.streamCreate(&st, streamNonBlocking)); err != nil {
			return err
		}
		p.side = append(p.side, st)
		if err := d.check("cuEventCreate", d.eventCreate(&ev, eventDisableTiming)); err != nil {
			return err
		}
		p.join = append(p.join, ev)
	}
	if len(p.hosts) > 0 {
		return p.allocFlags(2)
	}
	return nil
}

// allocFlags (re)allocates the host words, stride words a host point (on
// the backend's thread).
func (p *Program) allocFlags(stride int) error {
	d := p.b.d
	var host unsafe.Pointer
	words := stride * len(p.hosts)
	if err := d.check("cuMemHostAlloc", d.memHostAlloc(&host, uintptr(4*words), hostAllocPortable|hostAllocDevMap)); err != nil {
		return err
	}
	var dv uintptr
	if err := d.check("cuMemHostGetDevicePointer", d.memHostDevPtr(&dv, host, 0)); err != nil {
		d.memFreeHost(host)
		return err
	}
	if p.flags != nil {
		d.memFreeHost(unsafe.Pointer(&p.flags[0]))
	}
	p.flags, p.flagsDV, p.stride = unsafe.Slice((*uint32)(host), words), dv, stride
	clear(p.flags)
	return nil
}

// stream i of a group: the main stream, then the side streams.
func (p *Program) stream(i int) uintptr {
	if i == 0 {
		return p.main
	}
	return p.side[i-1]
}

func (p *Program) launch(i int, stream uintptr) error {
	s := &p.steps[i]
	r := p.b.d.launchKernel(s.pipe.fn, s.grid[0], s.grid[1], s.grid[2], s.tg[0], s.tg[1], s.tg[2], 0, stream, &s.params[0], nil)
	if r != 0 {
		d := &p.Graph.Dispatches[i]
		return fmt.Errorf("dispatch %d (%s, layer %d): %w", i, d.Kernel, d.Layer, p.b.d.check("cuLaunchKernel", r))
	}
	return nil
}

// encode launches dispatches [from, to) under sched. It starts and ends
// with all of their work ordered on the main stream: a barrier group of
// several dispatches forks onto side streams from an event on the main
// stream and joins back before the next barrier.
func (p *Program) encode(from, to int, sched Schedule) error {
	d := p.b.d
	for i := from; i < to; {
		j := i + 1
		for j < to && !p.barrier[j] {
			j++
		}
		switch {
		case sched == Serial || j-i == 1:
			for k := i; k < j; k++ {
				if err := p.launch(k, p.main); err != nil {
					return err
				}
			}
		case sched == Reversed:
			for k := j - 1; k >= i; k-- {
				if err := p.launch(k, p.main); err != nil {
					return err
				}
			}
		default:
			used := min(j-i, 1+len(p.side))
			if err := d.check("cuEventRecord", d.eventRecord(p.fork, p.main)); err != nil {
				return err
			}
			for s := 1; s < used; s++ {
				if err := d.check("cuStreamWaitEvent", d.streamWaitEvent(p.stream(s), p.fork, 0)); err != nil {
					return err
				}
			}
			for k := i; k < j; k++ {
				if err := p.launch(k, p.stream((k-i)%used)); err != nil {
					return err
				}
			}
			for s := 1; s < used; s++ {
				if err := d.check("cuEventRecord", d.eventRecord(p.join[s-1], p.stream(s))); err != nil {
					return err
				}
				if err := d.check("cuStreamWaitEvent", d.streamWaitEvent(p.main, p.join[s-1], 0)); err != nil {
					return err
				}
			}
		}
		i = j
	}
	return nil
}

// DropBarrier removes (or with keep restores) the barrier before dispatch
// i, for the barrier-soundness check; recorded replays are discarded.
func (p *Program) DropBarrier(i int, keep bool) {
	p.barrier[i] = keep
	if i == 0 {
		p.barrier[0] = true
	}
	_ = p.b.do(func() error { p.dropReplays(); return nil })
}

// Barriers lists the dispatches the graph placed a barrier before (the
// first dispatch aside).
func (p *Program) Barriers() []int {
	var out []int
	for i := 1; i < len(p.Graph.Dispatches); i++ {
		if p.Graph.Dispatches[i].Barrier {
			out = append(out, i)
		}
	}
	return out
}

// Run executes the window once; host points pass by (every expert is
// resident).
func (p *Program) Run() error { return p.RunHost(nil) }

// RunHost runs the window, calling host at every host point: the GPU writes
// the point's signal word after the router, runs on to the point's Wait and
// waits there for the release word, which a host goroutine spinning on the
// signal writes once host returns.
func (p *Program) RunHost(host func(graph.HostPoint) error) error {
	if host == nil {
		return p.run(nil, false)
	}
	return p.run(func(seq uint32) error { return p.serve(host, seq) }, false)
}

// run runs the window; serve, when set, answers its host points (checked:
// the GPU checks the smap at each and writes the release itself when every
// routed expert is resident).
func (p *Program) run(serve func(seq uint32) error, checked bool) error {
	serving := serve != nil && len(p.hosts) > 0
	p.seq++
	seq := p.seq
	var hostErr error
	done := make(chan struct{})
	if serving {
		go func() {
			defer close(done)
			hostErr = serve(seq)
		}()
	}
	err := p.b.do(func() error {
		if err := p.enqueue(serving, checked, seq); err != nil {
			return err
		}
		return p.b.d.check("cuStreamSynchronize", p.b.d.streamSynchronize(p.main))
	})
	if serving {
		if err != nil {
			p.releaseAll(seq) // never leave the server spinning
		}
		<-done
	}
	if err != nil {
		return fmt.Errorf("cuda: %s window T=%d: %w", p.Graph.Kind, p.Graph.Rows, err)
	}
	if hostErr != nil {
		return fmt.Errorf("cuda: %s window T=%d: %w", p.Graph.Kind, p.Graph.Rows, hostErr)
	}
	return nil
}

// enqueue puts one window on the main stream (on the backend's thread).
func (p *Program) enqueue(serve, checked bool, seq uint32) error {
	sched, replay := p.b.opt.Schedule, !p.b.opt.Direct
	d := p.b.d
	if err := p.uploadParams(); err != nil {
		return err
	}
	if !serve && !replay {
		return p.encode(0, len(p.steps), sched)
	}
	var execs []uintptr
	if replay {
		var err error
		if execs, err = p.record(sched); err != nil {
			return err
		}
	}
	from := 0
	for k, to := range p.cuts {
		if serve && p.waitAt[from] >= 0 {
			addr := p.flagsDV + uintptr(4*(p.stride*p.waitAt[from]+1))
			if err := d.check("cuStreamWaitValue32", d.streamWaitValue32(p.main, addr, seq, waitValueGEQ)); err != nil {
				return err
			}
		}
		if replay {
			if err := d.check("cuGraphLaunch", d.graphLaunch(execs[k], p.main)); err != nil {
				return err
			}
		} else if err := p.encode(from, to, sched); err != nil {
			return err
		}
		if serve && checked && p.signalAt[to] >= 0 {
			if err := p.launchCheck(p.signalAt[to], seq); err != nil {
				return err
			}
		} else if serve && p.signalAt[to] >= 0 {
			addr := p.flagsDV + uintptr(4*(p.stride*p.signalAt[to]))
			if err := d.check("cuStreamWriteValue32", d.streamWriteValue(p.main, addr, seq, 0)); err != nil {
				return err
			}
		}
		from = to
	}
	return nil
}

// serve answers the window's host points in order.
func (p *Program) serve(host func(graph.HostPoint) error, seq uint32) error {
	var first error
	for k, h := range p.hosts {
		if err := p.spin(&p.flags[p.stride*k], seq); err != nil {
			p.releaseAll(seq)
			return fmt.Errorf("host point of layer %d: %w", h.Layer, err)
		}
		if first == nil {
			if err := host(h); err != nil {
				first = fmt.Errorf("host point of layer %d: %w", h.Layer, err)
			}
		}
		atomic.StoreUint32(&p.flags[p.stride*k+1], seq)
	}
	return first
}

func (p *Program) releaseAll(seq uint32) {
	for k := range p.hosts {
		atomic.StoreUint32(&p.flags[p.stride*k+1], seq)
	}
}

// spin waits for a word the GPU writes, as the Metal backend's host thread
// spins (never a passive wait: the GPU is waiting on the answer).
func (p *Program) spin(word *uint32, seq uint32) error {
	deadline := time.Now().Add(p.b.opt.HostTimeout)
	for i := 0; atomic.LoadUint32(word) < seq; i++ {
		if i&1023 == 1023 {
			if time.Now().After(deadline) {
				return fmt.Errorf("the GPU did not signal within %v", p.b.opt.HostTimeout)
			}
			runtime.Gosched()
		}
	}
	return nil
}

// capture records what launch puts on the main stream into a CUDA graph
// (on the backend's thread); the graph is the caller's to destroy.
func (p *Program) capture(launch func() error) (uintptr, error) {
	d := p.b.d
	if err := d.check("cuStreamBeginCapture", d.beginCapture(p.main, captureModeThreadLocal)); err != nil {
		return 0, err
	}
	err := launch()
	var g uintptr
	if end := d.check("cuStreamEndCapture", d.endCapture(p.main, &g)); err == nil {
		err = end
	}
	if err != nil {
		if g != 0 {
			d.graphDestroy(g)
		}
		return 0, err
	}
	return g, nil
}

// record captures each segment of the window under sched into a CUDA
// graph (its edges are the joins encode makes at the barriers) and
// instantiates it, once per schedule (on the backend's thread).
func (p *Program) record(sched Schedule) ([]uintptr, error) {
	if e, ok := p.replays[sched]; ok {
		return e, nil
	}
	d := p.b.d
	var execs []uintptr
	nodes, edges := 0, 0
	from := 0
	for _, to := range p.cuts {
		g, err := p.capture(func() error { return p.encode(from, to, sched) })
		if err != nil {
			return nil, err
		}
		p.graphs = append(p.graphs, g)
		var exec uintptr
		if err := d.check("cuGraphInstantiate", d.graphInstantiate(&exec, g, 0)); err != nil {
			return nil, err
		}
		execs = append(execs, exec)
		var nn, ne uintptr
		d.graphGetNodes(g, nil, &nn)
		if d.graphGetEdgesV2 != nil {
			d.graphGetEdgesV2(g, nil, nil, nil, &ne)
		} else if d.graphGetEdges != nil {
			d.graphGetEdges(g, nil, nil, &ne)
		}
		nodes += int(nn)
		edges += int(ne)
		from = to
	}
	p.replays[sched] = execs
	p.GraphNodes, p.GraphEdges = nodes, edges
	return execs, nil
}

func (p *Program) dropReplays() {
	for _, execs := range p.replays {
		for _, e := range execs {
			p.b.d.graphExecDestroy(e)
		}
	}
	for _, g := range p.graphs {
		p.b.d.graphDestroy(g)
	}
	p.replays, p.graphs = map[Schedule][]uintptr{}, nil
}

// release frees the program's streams, events, graphs and host words.
func (p *Program) release() error {
	return p.b.do(func() error {
		d := p.b.d
		p.dropReplays()
		var errs []error
		for _, s := range append([]uintptr{p.main}, p.side...) {
			if s != 0 {
				errs = append(errs, d.check("cuStreamDestroy", d.streamDestroy(s)))
			}
		}
		for _, e := range append(append([]uintptr{p.fork}, p.join...), p.timers...) {
			if e != 0 {
				d.eventDestroy(e)
			}
		}
		if p.flags != nil {
			d.memFreeHost(unsafe.Pointer(&p.flags[0]))
		}
		p.main, p.side, p.fork, p.join, p.timers, p.flags = 0, nil, 0, nil, nil, nil
		return errors.Join(errs...)
	})
}

// uploadParams queues the copy of the window's params from the host mirror
// to the device on the main stream, ahead of the window's kernels (on the
// backend's thread). The mirror is page-locked, so the copy is
// asynchronous; the host writes it again only after the window ends.
func (p *Program) uploadParams() error {
	if p.params < 0 || p.paramBytes == 0 {
		return nil
	}
	m := p.mem
	return p.b.d.check("cuMemcpyHtoDAsync", p.b.d.memcpyHtoDAsync(m.ptrs[p.params], m.mirror[p.params], p.paramBytes, p.main))
}
