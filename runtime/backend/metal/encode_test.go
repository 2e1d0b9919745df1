package metal_test

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	_ "github.com/strata-llm/strata/generated/qwen38-flash-next" // registers the model's kernels and bindings
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend/metal"
)

const flashNext = "qwen38-flash-next"

var (
	graphsOnce sync.Once
	graphs     map[string]*graph.Graph
	numLayers  int
	graphsErr  error
)

// flashNextGraph is the trunk window graph of qwen38-flash-next, built by
// the generator (shared by the tests: they only read it).
func flashNextGraph(t testing.TB, rows int) *graph.Graph {
	return flashNextGraphOf(t, graph.KindTrunk, rows)
}

// flashNextGraphOf is a window graph of qwen38-flash-next: the trunk at T = 1
// and 4, or the MTP draft head at T = 2.
func flashNextGraphOf(t testing.TB, kind string, rows int) *graph.Graph {
	t.Helper()
	graphsOnce.Do(func() {
		c, err := models.Embedded(flashNext)
		if err != nil {
			graphsErr = err
			return
		}
		numLayers = c.Architecture.NumLayers
		graphs = map[string]*graph.Graph{}
		for _, s := range []struct {
			kind string
			rows int
		}{{graph.KindTrunk, 1}, {graph.KindTrunk, 4}, {graph.KindMTP, 2}} {
			g, err := gen.Window(c, s.rows, gen.Options{MTP: s.kind == graph.KindMTP})
			if err != nil {
				graphsErr = err
				return
			}
			graphs[fmt.Sprint(s.kind, s.rows)] = g
		}
	})
	if graphsErr != nil {
		t.Fatal(graphsErr)
	}
	g, ok := graphs[fmt.Sprint(kind, rows)]
	if !ok {
		t.Fatalf("no %s graph of %d rows in the test set", kind, rows)
	}
	return g
}

// cloneGraph deep-copies a graph, for tests that mutate one.
func cloneGraph(t testing.TB, g *graph.Graph) *graph.Graph {
	t.Helper()
	b, err := g.JSON()
	if err != nil {
		t.Fatal(err)
	}
	c, err := graph.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func flashNextModel(t testing.TB) *artifact.Artifact {
	t.Helper()
	m, err := artifact.Lookup(flashNext)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// declared is what the compiled library would declare per kernel.
func declared(m *artifact.Artifact) map[string][]metal.DeclaredConstant { return metal.DeclaredFrom(m) }

type rig struct {
	rec   *metal.Recorder
	b     *metal.Backend
	mem   *metal.Memory
	progs map[int]*metal.Program
	m     *artifact.Artifact
}

// newRig loads the given window graphs onto a recording backend.
func newRig(t testing.TB, opt metal.Options, configure func(*metal.Recorder), gs ...*graph.Graph) *rig {
	t.Helper()
	m := flashNextModel(t)
	k, err := metal.KernelsFrom(m)
	if err != nil {
		t.Fatal(err)
	}
	rec := metal.NewRecorder()
	rec.Declared = declared(m)
	if configure != nil {
		configure(rec)
	}
	b, err := metal.New(rec, k, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	mem, err := b.NewMemory(gs...)
	if err != nil {
		t.Fatal(err)
	}
	r := &rig{rec: rec, b: b, mem: mem, progs: map[int]*metal.Program{}, m: m}
	for _, g := range gs {
		p, err := b.Compile(g, mem)
		if err != nil {
			t.Fatal(err)
		}
		r.progs[g.Rows] = p
	}
	return r
}

// runWindow runs one window of program rows and returns its recorded calls.
func (r *rig) runWindow(t testing.TB, rows int) []metal.Op {
	t.Helper()
	r.rec.Reset()
	if err := r.progs[rows].Run(); err != nil {
		t.Fatal(err)
	}
	return r.rec.Ops()
}

// checker holds a recorded window against its graph, independently of the
// encoder: it replays the calls on a model of the encoder's state and
// compares every dispatch with the graph and with the generator's own map
// from dispatches to pipelines (artifact.Artifact.Pipeline).
type checker struct {
	g        *graph.Graph
	rec      *metal.Recorder
	m        *artifact.Artifact
	icb      bool        // ICB replay expected
	touch    bool        // pipelines touched before ICB executions
	dispatch map[int]int // dispatch index → op index it ran at
	signals  map[int]int // host point → op index of its signal
	waits    map[int]int // host point → op index of its wait
}

func newChecker(g *graph.Graph, rec *metal.Recorder, m *artifact.Artifact) *checker {
	return &checker{g: g, rec: rec, m: m}
}

type slot struct {
	buf    string
	offset int64
	bytes  []byte
	isSet  bool
}

func (c *checker) label(b metal.Buffer) string { return c.rec.Label(b) }

// pipelineKey is the generator's pipeline key of a recorded pipeline.
func (c *checker) pipelineKey(p metal.Pipeline) (string, error) {
	f, _, ok := c.rec.Function(p)
	if !ok {
		return "", fmt.Errorf("pipeline %d was never built", p)
	}
	ap := artifact.Pipeline{Kernel: f.Name}
	for _, k := range f.Constants {
		ap.Values = append(ap.Values, artifact.ConstValue{Index: k.Index, Value: k.Value})
	}
	return ap.Key(), nil
}

func (c *checker) wantKey(i int) (string, error) {
	p, err := c.m.Pipeline(&c.g.Dispatches[i])
	if err != nil {
		return "", err
	}
	// The generator's tuple, less the constants the kernel's code does not
	// read (Metal's reflection would not declare them).
	k, _ := c.m.Kernel(p.Kernel)
	p.Values = slices.DeleteFunc(p.Values, func(v artifact.ConstValue) bool { return !slices.Contains(k.Constants, v.Index) })
	return p.Key(), nil
}

// check verifies one window's calls.
func (c *checker) check(ops []metal.Op) error {
	g := c.g
	n := 0 // next dispatch of the graph
	inPass, barrier := false, false
	var pipe metal.Pipeline
	slots := map[int]slot{}
	resident := map[string]bool{}
	touched := map[metal.Pipeline]bool{}
	nextSignal, nextWait := 0, 0
	var lastSignal uint64
	c.dispatch, c.signals, c.waits = map[int]int{}, map[int]int{}, map[int]int{}
	waitAt := func(k int) int {
		if w := g.HostPoints[k].Wait; w != 0 {
			return w
		}
		return g.HostPoints[k].After + 1
	}
	if len(ops) == 0 || ops[0].Kind != metal.OpBeginWindow {
		return fmt.Errorf("the window does not begin with BeginWindow")
	}
	committed := false
	for at, o := range ops[1:] {
		at++
		fail := func(format string, args ...any) error {
			return fmt.Errorf("op %d (%v), graph dispatch %d: %s", at, o, n, fmt.Sprintf(format, args...))
		}
		if committed && o.Kind != metal.OpEndWindow {
			return fail("call after Commit")
		}
		switch o.Kind {
		case metal.OpBeginPass:
			if inPass {
				return fail("pass opened twice")
			}
			inPass, pipe, slots, resident, touched = true, 0, map[int]slot{}, map[string]bool{}, map[metal.Pipeline]bool{}
		case metal.OpEndPass:
			if !inPass {
				return fail("no pass to end")
			}
			if barrier {
				return fail("a barrier with no dispatch after it in its pass")
			}
			inPass = false
		case metal.OpSetPipeline, metal.OpSetBuffer, metal.OpSetBytes, metal.OpBarrier, metal.OpUseResources:
			if !inPass {
				return fail("outside a pass")
			}
			switch o.Kind {
			case metal.OpSetPipeline:
				pipe = o.Pipeline
			case metal.OpSetBuffer:
				slots[o.Slot] = slot{buf: c.label(o.Buffer), offset: o.Offset, isSet: true}
			case metal.OpSetBytes:
				slots[o.Slot] = slot{bytes: o.Bytes, isSet: true}
			case metal.OpBarrier:
				if barrier {
					return fail("two barriers in a row")
				}
				barrier = true
			case metal.OpUseResources:
				for _, b := range o.Buffers {
					resident[c.label(b)] = true
				}
			}
		case metal.OpDispatch:
			if !inPass {
				return fail("dispatch outside a pass")
			}
			if o.Grid == [3]int{} { // a pipeline touch before an ICB execution
				if !c.icb || !c.touch {
					return fail("zero-grid dispatch without ICB pipeline touches")
				}
				touched[pipe] = true
				continue
			}
			if n >= len(g.Dispatches) {
				return fail("more dispatches than the graph has")
			}
			if c.icb && g.ICB.Commands[n].Replay {
				return fail("dispatch %d replays from the ICB but was encoded directly", n)
			}
			if err := c.checkDispatch(n, pipe, slots, o.Grid, o.Threadgroup, barrier); err != nil {
				return fail("%v", err)
			}
			c.dispatch[n] = at
			barrier = false
			n++
		case metal.OpExecuteICB:
			if !inPass || !c.icb {
				return fail("unexpected ICB execution")
			}
			if o.First != n {
				return fail("executes commands from %d", o.First)
			}
			if !slices.Contains(g.ICB.Runs, graph.ICBRun{First: o.First, Count: o.Count}) {
				return fail("[%d,+%d) is not a run of the ICB plan", o.First, o.Count)
			}
			if barrier != g.ICB.Commands[n].Barrier {
				return fail("memory barrier before the run: %v, its first command's barrier bit: %v", barrier, g.ICB.Commands[n].Barrier)
			}
			cmds := c.rec.ICBCommands(o.ICB)
			for i := o.First; i < o.First+o.Count; i++ {
				for _, bb := range cmds[i].Buffers {
					if !resident[c.label(bb.Buffer)] {
						return fail("command %d binds buffer %s, not declared with useResources in this pass", i, c.label(bb.Buffer))
					}
				}
				if c.touch && !touched[cmds[i].Pipeline] {
					return fail("command %d's pipeline was not touched in this pass", i)
				}
				c.dispatch[i] = at
			}
			n += o.Count
			barrier, pipe, slots = false, 0, map[int]slot{}
		case metal.OpSignal, metal.OpWait:
			if inPass {
				return fail("event encoded inside a pass")
			}
			if o.Kind == metal.OpSignal {
				k := nextSignal
				if k >= len(g.HostPoints) {
					return fail("more signals than host points")
				}
				if want := g.HostPoints[k].After + 1; n != want {
					return fail("host point %d (layer %d) signals after %d dispatches, the graph after %d", k, g.HostPoints[k].Layer, n, want)
				}
				if k > 0 && o.Value != lastSignal+2 {
					return fail("signal value %d after %d", o.Value, lastSignal)
				}
				lastSignal = o.Value
				c.signals[k] = at
				nextSignal++
			} else {
				k := nextWait
				if k >= nextSignal {
					return fail("wait %d before its signal", k)
				}
				if want := waitAt(k); n != want {
					return fail("host point %d (layer %d) waits after %d dispatches, the graph after %d", k, g.HostPoints[k].Layer, n, want)
				}
				if o.Value != ops[c.signals[k]].Value+1 {
					return fail("wait value %d for signal %d", o.Value, ops[c.signals[k]].Value)
				}
				c.waits[k] = at
				nextWait++
			}
		case metal.OpCommit:
			if inPass {
				return fail("commit inside a pass")
			}
			committed = true
		case metal.OpEndWindow, metal.OpBeginWindow:
			if o.Kind == metal.OpBeginWindow || !committed {
				return fail("window boundaries out of order")
			}
		}
	}
	if !committed {
		return fmt.Errorf("the window was never committed")
	}
	if n != len(g.Dispatches) {
		return fmt.Errorf("%d dispatches encoded, the graph has %d", n, len(g.Dispatches))
	}
	if nextSignal != len(g.HostPoints) || nextWait != len(g.HostPoints) {
		return fmt.Errorf("%d signals and %d waits for %d host points", nextSignal, nextWait, len(g.HostPoints))
	}
	return nil
}

// checkDispatch compares a directly encoded dispatch with the graph.
func (c *checker) checkDispatch(i int, pipe metal.Pipeline, slots map[int]slot, grid, tg [3]int, barrier bool) error {
	d := &c.g.Dispatches[i]
	key, err := c.pipelineKey(pipe)
	if err != nil {
		return err
	}
	want, err := c.wantKey(i)
	if err != nil {
		return err
	}
	if key != want {
		return fmt.Errorf("pipeline %q, the graph's is %q", key, want)
	}
	if grid != d.Grid || tg != d.Threadgroup {
		return fmt.Errorf("grid %v threadgroup %v, the graph has %v %v", grid, tg, d.Grid, d.Threadgroup)
	}
	if barrier != d.Barrier {
		return fmt.Errorf("barrier %v, the graph has %v", barrier, d.Barrier)
	}
	next := 0
	for _, a := range d.Args {
		s := slots[a.Slot]
		if !s.isSet || s.bytes != nil || s.buf != a.Buffer || s.offset != a.Offset {
			return fmt.Errorf("slot %d holds %+v, the graph binds %s at %s+%d", a.Slot, s, a.Name, a.Buffer, a.Offset)
		}
		next = max(next, a.Slot+1)
	}
	args, err := c.m.EncodeArgs(d.Family, d.Scalars)
	if err != nil {
		return err
	}
	if len(args) > 0 {
		if s := slots[next]; !s.isSet || !bytes.Equal(s.bytes, args) {
			return fmt.Errorf("argument struct at slot %d is %x, want %x", next, s.bytes, args)
		}
	}
	return nil
}

// checkICB verifies the recorded ICB against the plan: each replayable
// command with the graph's pipeline, grid, bindings (argument blocks at the
// plan's offsets, holding the argument struct) and barrier bit; the others
// left empty.
func (c *checker) checkICB(icb metal.ICB) error {
	plan := c.g.ICB
	cmds := c.rec.ICBCommands(icb)
	if len(cmds) != len(c.g.Dispatches) {
		return fmt.Errorf("ICB of %d commands for %d dispatches", len(cmds), len(c.g.Dispatches))
	}
	for i, pc := range plan.Commands {
		cmd := cmds[i]
		if !pc.Replay {
			if cmd.Pipeline != 0 {
				return fmt.Errorf("command %d is recorded, the plan encodes it directly", i)
			}
			continue
		}
		d := &c.g.Dispatches[i]
		key, err := c.pipelineKey(cmd.Pipeline)
		if err != nil {
			return err
		}
		if _, forICB, _ := c.rec.Function(cmd.Pipeline); !forICB {
			return fmt.Errorf("command %d: pipeline not built for ICBs", i)
		}
		want, err := c.wantKey(i)
		if err != nil {
			return err
		}
		if key != want {
			return fmt.Errorf("command %d: pipeline %q, want %q", i, key, want)
		}
		if cmd.Grid != d.Grid || cmd.Threadgroup != d.Threadgroup {
			return fmt.Errorf("command %d: grid %v threadgroup %v, want %v %v", i, cmd.Grid, cmd.Threadgroup, d.Grid, d.Threadgroup)
		}
		if cmd.Barrier != pc.Barrier || cmd.Barrier != d.Barrier {
			return fmt.Errorf("command %d: barrier bit %v, plan %v, graph %v", i, cmd.Barrier, pc.Barrier, d.Barrier)
		}
		bySlot := map[int]metal.BufferBinding{}
		for _, bb := range cmd.Buffers {
			if _, dup := bySlot[bb.Slot]; dup {
				return fmt.Errorf("command %d binds slot %d twice", i, bb.Slot)
			}
			bySlot[bb.Slot] = bb
		}
		wantBindings := len(d.Args)
		for _, a := range d.Args {
			bb, ok := bySlot[a.Slot]
			if !ok || c.label(bb.Buffer) != a.Buffer || bb.Offset != a.Offset {
				return fmt.Errorf("command %d: slot %d holds %s+%d, the graph binds %s+%d", i, a.Slot, c.label(bb.Buffer), bb.Offset, a.Buffer, a.Offset)
			}
		}
		if pc.Args != nil {
			wantBindings++
			bb, ok := bySlot[pc.Args.Slot]
			if !ok || !strings.HasPrefix(c.label(bb.Buffer), "args ") || bb.Offset != pc.Args.Offset {
				return fmt.Errorf("command %d: argument slot %d holds %s+%d, the plan puts it at offset %d", i, pc.Args.Slot, c.label(bb.Buffer), bb.Offset, pc.Args.Offset)
			}
			args, err := c.m.EncodeArgs(d.Family, d.Scalars)
			if err != nil {
				return err
			}
			host := c.rec.Contents(bb.Buffer)
			if int64(len(host)) < pc.Args.Offset+pc.Args.Size || !bytes.Equal(host[pc.Args.Offset:pc.Args.Offset+pc.Args.Size], args) {
				return fmt.Errorf("command %d: the argument buffer does not hold the argument struct %x at %d", i, args, pc.Args.Offset)
			}
		}
		if len(cmd.Buffers) != wantBindings {
			return fmt.Errorf("command %d binds %d buffers, want %d", i, len(cmd.Buffers), wantBindings)
		}
	}
	return nil
}

// sharedExpert lists, per layer, the dispatches that read the layer's shared
// expert weights (found from the tensor placement, not from the schedule).
// The MTP head's layer i is layer numLayers+i.
func sharedExpert(g *graph.Graph) map[int][]int {
	owner := map[[2]any]int{}
	for _, t := range g.Tensors {
		var l int
		var role string
		name, base := t.Name, 0
		if rest, ok := strings.CutPrefix(name, "mtp."); ok {
			name, base = rest, numLayers
		}
		if _, err := fmt.Sscanf(name, "layers.%d.%s", &l, &role); err == nil && strings.HasPrefix(role, "moe.shared") {
			owner[[2]any{t.Buffer, t.Offset}] = base + l
		}
	}
	out := map[int][]int{}
	for i, d := range g.Dispatches {
		if w, ok := d.Arg("w"); ok {
			if l, ok := owner[[2]any{w.Buffer, w.Offset}]; ok {
				out[l] = append(out[l], i)
			}
		}
	}
	return out
}

// checkSharedExpert verifies that every layer's shared-expert dispatches ran
// between its host point's signal and wait.
func (c *checker) checkSharedExpert() error {
	shared := sharedExpert(c.g)
	for k, h := range c.g.HostPoints {
		ds := shared[h.Layer]
		if len(ds) < 3 {
			return fmt.Errorf("layer %d: %d shared-expert dispatches found, the test expects gate, up and down", h.Layer, len(ds))
		}
		for _, i := range ds {
			if at := c.dispatch[i]; at <= c.signals[k] || at >= c.waits[k] {
				return fmt.Errorf("layer %d: shared-expert dispatch %d (%s) at op %d, outside signal %d … wait %d", h.Layer, i, c.g.Dispatches[i].Kernel, at, c.signals[k], c.waits[k])
			}
		}
	}
	return nil
}

func firstICB(ops []metal.Op) metal.ICB {
	for _, o := range ops {
		if o.Kind == metal.OpExecuteICB {
			return o.ICB
		}
	}
	return 0
}

// TestEncodingMatchesGraph runs windows of qwen38-flash-next (the trunk at
// T = 1 and 4, the MTP head at T = 2) on the recorder, encoded directly and
// replayed from ICBs (with and without the pre-Apple9 pipeline touches), and
// holds every recorded call to the graph.
func TestEncodingMatchesGraph(t *testing.T) {
	for _, mode := range []struct {
		name       string
		icb, touch bool
	}{{"direct", false, false}, {"icb", true, false}, {"icb+touch", true, true}} {
		for _, shape := range []struct {
			kind string
			rows int
		}{{graph.KindTrunk, 1}, {graph.KindTrunk, 4}, {graph.KindMTP, 2}} {
			rows := shape.rows
			t.Run(fmt.Sprintf("%s/%s/T=%d", mode.name, shape.kind, rows), func(t *testing.T) {
				g := flashNextGraphOf(t, shape.kind, rows)
				r := newRig(t, metal.Options{ICB: mode.icb}, func(rec *metal.Recorder) {
					info := rec.Info()
					info.ICBNeedsTouch = mode.touch
					rec.SetInfo(info)
				}, g)
				ops := r.runWindow(t, rows)
				c := newChecker(g, r.rec, r.m)
				c.icb, c.touch = mode.icb, mode.touch
				if err := c.check(ops); err != nil {
					t.Fatal(err)
				}
				if err := c.checkSharedExpert(); err != nil {
					t.Fatal(err)
				}
				st := r.progs[rows].Stats().Last
				if mode.icb {
					icb := firstICB(ops)
					if icb == 0 {
						t.Fatal("no ICB execution recorded")
					}
					if err := c.checkICB(icb); err != nil {
						t.Fatal(err)
					}
					if want := g.ICB.Replayable(); st.Replayed != want || st.Direct != len(g.Dispatches)-want {
						t.Errorf("stats: %d replayed, %d direct; the plan replays %d of %d", st.Replayed, st.Direct, want, len(g.Dispatches))
					}
				} else if st.Direct != len(g.Dispatches) || st.Replayed != 0 {
					t.Errorf("stats: %d direct, %d replayed, want %d direct", st.Direct, st.Replayed, len(g.Dispatches))
				}
				if st.HostPoints != len(g.HostPoints) {
					t.Errorf("stats: %d host points, want %d", st.HostPoints, len(g.HostPoints))
				}
				barriers := 0
				for _, o := range ops {
					if o.Kind == metal.OpBarrier {
						barriers++
					}
				}
				t.Logf("%d dispatches, %d host points, %d calls, %d memory barriers, %d pipelines", len(g.Dispatches), len(g.HostPoints), len(ops), barriers, r.b.Pipelines())
			})
		}
	}
}

// The checker must fail when the stream or the graph is wrong: each control
// breaks one thing the check covers.
func TestCheckerCatchesMutations(t *testing.T) {
	g := flashNextGraph(t, 1)
	r := newRig(t, metal.Options{}, nil, g)
	ops := r.runWindow(t, 1)
	if err := newChecker(g, r.rec, r.m).check(ops); err != nil {
		t.Fatalf("the unmutated stream fails: %v", err)
	}
	index := func(kind metal.OpKind, nth int) int {
		for i, o := range ops {
			if o.Kind == kind {
				if nth == 0 {
					return i
				}
				nth--
			}
		}
		t.Fatalf("no %v #%d", kind, nth)
		return -1
	}
	without := func(i int) []metal.Op { return slices.Delete(slices.Clone(ops), i, i+1) }
	moved := func(from, to int) []metal.Op {
		out := without(from)
		return slices.Insert(out, to, ops[from])
	}
	changed := func(i int, f func(*metal.Op)) []metal.Op {
		out := slices.Clone(ops)
		f(&out[i])
		return out
	}
	sig := index(metal.OpSignal, 3)
	for _, ctl := range []struct {
		name string
		ops  []metal.Op
	}{
		{"a barrier dropped", without(index(metal.OpBarrier, 5))},
		{"a barrier added", slices.Insert(slices.Clone(ops), index(metal.OpDispatch, 0)+1, metal.Op{Kind: metal.OpBarrier})},
		{"a binding offset changed", changed(index(metal.OpSetBuffer, 40), func(o *metal.Op) { o.Offset += 256 })},
		{"a binding slot changed", changed(index(metal.OpSetBuffer, 40), func(o *metal.Op) { o.Slot++ })},
		{"a pipeline changed", changed(index(metal.OpSetPipeline, 7), func(o *metal.Op) { o.Pipeline = ops[index(metal.OpSetPipeline, 8)].Pipeline })},
		{"a grid changed", changed(index(metal.OpDispatch, 9), func(o *metal.Op) { o.Grid[0]++ })},
		{"argument bytes changed", changed(index(metal.OpSetBytes, 2), func(o *metal.Op) { o.Bytes = []byte{1, 2, 3, 4} })},
		{"a dispatch dropped", without(index(metal.OpDispatch, 100))},
		{"a signal moved inside a pass", moved(sig, sig-2)},
		{"a signal moved before the previous wait", moved(sig, index(metal.OpWait, 2))},
		{"a wait dropped", without(index(metal.OpWait, 10))},
		{"a wait moved before its shared expert", moved(index(metal.OpWait, 0), index(metal.OpSignal, 0)+1)},
	} {
		if err := newChecker(g, r.rec, r.m).check(ctl.ops); err == nil {
			t.Errorf("%s: not caught", ctl.name)
		} else {
			t.Logf("%s: %v", ctl.name, err)
		}
	}

	// The same stream against a graph that differs from the one encoded.
	for _, ctl := range []struct {
		name   string
		mutate func(*graph.Graph)
	}{
		{"a barrier bit flipped", func(g *graph.Graph) { g.Dispatches[300].Barrier = !g.Dispatches[300].Barrier }},
		{"a constant changed", func(g *graph.Graph) { g.Dispatches[50].Consts[0].Value++ }},
		{"a host point's wait moved", func(g *graph.Graph) { g.HostPoints[2].Wait-- }},
		{"a binding offset changed", func(g *graph.Graph) { g.Dispatches[60].Args[1].Offset += 4 }},
	} {
		mg := cloneGraph(t, g)
		ctl.mutate(mg)
		if err := newChecker(mg, r.rec, r.m).check(ops); err == nil {
			t.Errorf("graph with %s: not caught", ctl.name)
		} else {
			t.Logf("graph with %s: %v", ctl.name, err)
		}
	}

	// A shared-expert dispatch moved behind its wait: the schedule check
	// passes (the graph says so) but the shared-expert check does not.
	mg := cloneGraph(t, g)
	h := mg.HostPoints[0]
	mg.HostPoints[0].Wait = h.After + 1
	c := newChecker(mg, r.rec, r.m)
	c.dispatch, c.signals, c.waits = map[int]int{}, map[int]int{0: 0}, map[int]int{0: 1}
	for _, i := range sharedExpert(mg)[h.Layer] {
		c.dispatch[i] = 5
	}
	if err := c.checkSharedExpert(); err == nil {
		t.Error("shared expert outside signal…wait: not caught")
	}
}

func TestICBCheckerCatchesMutations(t *testing.T) {
	g := flashNextGraph(t, 1)
	r := newRig(t, metal.Options{ICB: true}, nil, g)
	ops := r.runWindow(t, 1)
	icb := firstICB(ops)
	c := newChecker(g, r.rec, r.m)
	c.icb = true
	if err := c.checkICB(icb); err != nil {
		t.Fatalf("the unmutated ICB fails: %v", err)
	}
	for _, ctl := range []struct {
		name   string
		mutate func(*graph.Graph)
	}{
		{"a barrier bit", func(g *graph.Graph) {
			i := slices.IndexFunc(g.ICB.Commands, func(c graph.ICBCommand) bool { return c.Replay && !c.Barrier })
			g.ICB.Commands[i].Barrier, g.Dispatches[i].Barrier = true, true
		}},
		{"an argument offset", func(g *graph.Graph) {
			i := slices.IndexFunc(g.ICB.Commands, func(c graph.ICBCommand) bool { return c.Replay && c.Args != nil })
			g.ICB.Commands[i].Args.Offset += 16
		}},
		{"a replay flag", func(g *graph.Graph) {
			i := slices.IndexFunc(g.ICB.Commands, func(c graph.ICBCommand) bool { return !c.Replay })
			g.ICB.Commands[i].Replay = true
		}},
	} {
		mg := cloneGraph(t, g)
		ctl.mutate(mg)
		mc := newChecker(mg, r.rec, r.m)
		mc.icb = true
		if err := mc.checkICB(icb); err == nil {
			t.Errorf("ICB against a plan with a changed %s: not caught", ctl.name)
		}
	}
}
