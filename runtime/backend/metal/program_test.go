package metal_test

import (
	"errors"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend/metal"
)

// hostLog is a residency hook that records, at each call, the layer and how
// far the simulated GPU had got.
type hostLog struct {
	rec     *metal.Recorder
	layers  []int
	gpuAt   []int
	failAt  int // layer whose call fails; -1: none
	failErr error
}

func (h *hostLog) MakeResident(_ *graph.Graph, hp graph.HostPoint) error {
	h.layers = append(h.layers, hp.Layer)
	h.gpuAt = append(h.gpuAt, h.rec.Executed())
	if hp.Layer == h.failAt {
		return h.failErr
	}
	return nil
}

// At each host point the hook runs after the GPU has run everything up to
// the wait (the router and the shared expert) and before anything after it:
// the simulated GPU stops at the wait until the host releases it.
func TestHostPointsRunTheHook(t *testing.T) {
	for _, icb := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "icb"}[icb], func(t *testing.T) { testHostPoints(t, icb) })
	}
}

func testHostPoints(t *testing.T, icb bool) {
	g := flashNextGraph(t, 4)
	log := &hostLog{failAt: -1}
	r := newRig(t, metal.Options{Residency: log, ICB: icb}, func(rec *metal.Recorder) { log.rec = rec }, g)
	for w := 0; w < 2; w++ {
		log.layers, log.gpuAt = nil, nil
		ops := r.runWindow(t, 4)
		if len(log.layers) != len(g.HostPoints) {
			t.Fatalf("window %d: the hook ran %d times for %d host points", w, len(log.layers), len(g.HostPoints))
		}
		for k, h := range g.HostPoints {
			if log.layers[k] != h.Layer || log.gpuAt[k] != h.Wait {
				t.Errorf("window %d, host point %d: hook for layer %d with the GPU at dispatch %d, want layer %d at %d", w, k, log.layers[k], log.gpuAt[k], h.Layer, h.Wait)
			}
		}
		// Event values keep rising across windows.
		var vals []uint64
		for _, o := range ops {
			if o.Kind == metal.OpSignal || o.Kind == metal.OpWait {
				vals = append(vals, o.Value)
			}
		}
		if want := uint64(w*2*len(g.HostPoints)) + 1; vals[0] != want {
			t.Errorf("window %d starts at event value %d, want %d", w, vals[0], want)
		}
		for i := 1; i < len(vals); i++ {
			if vals[i] != vals[i-1]+1 {
				t.Fatalf("window %d: event values %d then %d", w, vals[i-1], vals[i])
			}
		}
	}
	st := r.b.Stats()
	if st.Windows != 2 || st.Total.HostPoints != 2*len(g.HostPoints) || st.Last.GPU <= 0 || st.Last.Wall <= 0 || st.Last.Encode <= 0 || st.Last.HostBefore <= 0 {
		t.Errorf("stats %+v", st)
	}
}

// A failing hook still releases the GPU: the window completes, reports the
// error, and the next window runs.
func TestHookErrorReleasesTheWindow(t *testing.T) {
	g := flashNextGraph(t, 1)
	log := &hostLog{failAt: 5, failErr: errors.New("disk on fire")}
	r := newRig(t, metal.Options{Residency: log}, func(rec *metal.Recorder) { log.rec = rec }, g)
	err := r.progs[1].Run()
	if err == nil || !strings.Contains(err.Error(), "disk on fire") || !strings.Contains(err.Error(), "layer 5") {
		t.Fatalf("Run: %v", err)
	}
	if len(log.layers) != 6 {
		t.Errorf("the hook ran %d times, want 6 (none after the failure)", len(log.layers))
	}
	ops := r.rec.Ops()
	if ops[len(ops)-1].Kind != metal.OpEndWindow {
		t.Error("the failed window was not ended")
	}
	log.failAt = -1
	if err := r.progs[1].Run(); err != nil {
		t.Fatalf("the window after a failed hook: %v", err)
	}
}

// A command buffer that faults on the GPU fails its window, not the backend.
func TestGPUFaultFailsTheWindow(t *testing.T) {
	g := flashNextGraph(t, 1)
	r := newRig(t, metal.Options{}, nil, g)
	r.rec.FailNext(errors.New("kIOGPUCommandBufferCallbackErrorPageFault"))
	if err := r.progs[1].Run(); err == nil || !strings.Contains(err.Error(), "PageFault") {
		t.Fatalf("Run: %v", err)
	}
	if err := r.progs[1].Run(); err != nil {
		t.Fatalf("the window after a fault: %v", err)
	}
}

// hungDevice is a GPU that never signals nor finishes.
type hungDevice struct{ *metal.Recorder }

func (hungDevice) SignaledValue(metal.Event) uint64 { return 0 }
func (hungDevice) Status() (bool, error)            { return false, nil }

// A window that never finishes times out, and leaves the backend refusing
// more windows (a command buffer may still wait on the event).
func TestHungWindowTimesOut(t *testing.T) {
	g := flashNextGraph(t, 1)
	k, err := metal.KernelsFrom(flashNextModel(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := metal.New(hungDevice{metal.NewRecorder()}, k, metal.Options{HostTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mem, err := b.NewMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Compile(g, mem)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err == nil || !strings.Contains(err.Error(), "no signal") {
		t.Fatalf("Run: %v", err)
	}
	if err := p.Run(); err == nil || !strings.Contains(err.Error(), "never finished") {
		t.Fatalf("second Run: %v", err)
	}
}

// The library must come back with the MSL version asked and safe math.
func TestLibraryReadBack(t *testing.T) {
	k, err := metal.KernelsFrom(flashNextModel(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		info metal.LibraryInfo
		want string
	}{
		{"the default MSL version", metal.LibraryInfo{LanguageVersion: metal.LanguageVersion{Major: 2, Minor: 4}, SafeMath: true}, "MSL 3.1, it reports 2.4"},
		{"fast math", metal.LibraryInfo{LanguageVersion: metal.DefaultLanguageVersion}, "safe math"},
	} {
		rec := metal.NewRecorder()
		rec.Reported = &c.info
		if _, err := metal.New(rec, k, metal.Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New: %v", c.name, err)
		}
		if rec.Live() != 0 {
			t.Errorf("%s: %d objects left after a failed New", c.name, rec.Live())
		}
	}
	rec := metal.NewRecorder()
	b, err := metal.New(rec, k, metal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if src := rec.Sources(); len(src) != 1 || src[0] != k.Source || !strings.Contains(src[0], "function_constant") {
		t.Error("the library was not compiled from kernels.metal")
	}
	if b.Library().LanguageVersion != metal.DefaultLanguageVersion {
		t.Errorf("library %+v", b.Library())
	}
}

func TestGuardsAtLoad(t *testing.T) {
	g := flashNextGraph(t, 1)
	m := flashNextModel(t)
	k, err := metal.KernelsFrom(m)
	if err != nil {
		t.Fatal(err)
	}
	compile := func(rec *metal.Recorder, g *graph.Graph) error {
		b, err := metal.New(rec, k, metal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		mem, err := b.NewMemory(g)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Compile(g, mem)
		return err
	}
	// A pipeline that allows fewer threads than a dispatch's threadgroup.
	rec := metal.NewRecorder()
	rec.MaxThreads = 128
	var ge *graph.GuardError
	if err := compile(rec, g); !errors.As(err, &ge) || !strings.Contains(err.Error(), "its pipeline allows 128") {
		t.Errorf("pipeline limit: %v", err)
	}
	// An unchunked grid past 2^25 threadgroups.
	big := cloneGraph(t, g)
	big.Dispatches[3].Grid = [3]int{1 << 13, 1 << 13, 1}
	if err := compile(metal.NewRecorder(), big); !errors.As(err, &ge) || ge.Dispatch != 3 {
		t.Errorf("grid limit: %v", err)
	}
	// A constant whose index drifted from what the library declares.
	rec = metal.NewRecorder()
	rec.Declared = declared(m)
	decl := rec.Declared["rmsnorm"]
	decl[len(decl)-1].Index += 50
	if err := compile(rec, g); err == nil || !strings.Contains(err.Error(), "rmsnorm") {
		t.Errorf("declared constants: %v", err)
	}
	// A binding at another slot than the kernel reads it.
	moved := cloneGraph(t, g)
	moved.Dispatches[1].Args[0].Slot, moved.Dispatches[1].Args[1].Slot = moved.Dispatches[1].Args[1].Slot, moved.Dispatches[1].Args[0].Slot
	if err := compile(metal.NewRecorder(), moved); err == nil || !strings.Contains(err.Error(), "slot") {
		t.Errorf("binding slots: %v", err)
	}
}

func TestICBPlanChecked(t *testing.T) {
	g := flashNextGraph(t, 1)
	k, err := metal.KernelsFrom(flashNextModel(t))
	if err != nil {
		t.Fatal(err)
	}
	b, err := metal.New(metal.NewRecorder(), k, metal.Options{ICB: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mem, err := b.NewMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		mutate func(*graph.Graph)
	}{
		{"no plan", func(g *graph.Graph) { g.ICB = nil }},
		{"a run across a host signal", func(g *graph.Graph) {
			h := g.HostPoints[0]
			for i, r := range g.ICB.Runs {
				if r.First+r.Count == h.After+1 {
					g.ICB.Runs[i].Count += g.ICB.Runs[i+1].Count
					g.ICB.Runs = append(g.ICB.Runs[:i+1], g.ICB.Runs[i+2:]...)
					return
				}
			}
			t.Fatal("no run ends at the first signal")
		}},
		{"a stale barrier bit", func(g *graph.Graph) { g.ICB.Commands[5].Barrier = !g.ICB.Commands[5].Barrier }},
	} {
		mg := cloneGraph(t, g)
		c.mutate(mg)
		if _, err := b.Compile(mg, mem); err == nil {
			t.Errorf("%s: compiled", c.name)
		}
	}
}

func TestMemory(t *testing.T) {
	g1, g4 := flashNextGraph(t, 1), flashNextGraph(t, 4)
	r := newRig(t, metal.Options{}, nil, g1, g4)
	act1, _ := g1.Buffer("act")
	act4, _ := g4.Buffer("act")
	if got := len(r.mem.Buffer("act")); int64(got) != max(act1.Size, act4.Size) {
		t.Errorf("act has %d bytes, want the larger shape's %d", got, max(act1.Size, act4.Size))
	}
	if _, err := r.mem.Bytes(graph.Range{Buffer: "weights", Size: 4}); err == nil {
		t.Error("a recording has no host memory for the 10 GB weights, yet Bytes returned some")
	}
	params, err := r.mem.Bytes(graph.Range{Buffer: "params", Offset: 4, Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	params[0] = 7
	snap := r.mem.Snapshot(graph.KindParams, nil)
	r.mem.Clear(graph.KindParams)
	if params[0] != 0 {
		t.Error("Clear left the params")
	}
	r.mem.Restore(snap)
	if params[0] != 7 {
		t.Error("Restore did not bring the params back")
	}
	if err := r.mem.Wrap("params", make([]byte, 1<<20)); err == nil || !strings.Contains(err.Error(), "before compiling") {
		t.Errorf("Wrap after Compile: %v", err)
	}
	// The shapes must share the layout of what persists.
	other := cloneGraph(t, g4)
	for i := range other.Buffers {
		if other.Buffers[i].Name == "state" {
			other.Buffers[i].Size += 256
		}
	}
	if _, err := r.b.NewMemory(g1, other); err == nil {
		t.Error("state buffers of different sizes were accepted")
	}
}

func TestWrapNeedsPages(t *testing.T) {
	g := flashNextGraph(t, 1)
	r := newRig(t, metal.Options{}, nil)
	page := int(r.b.Info().PageSize)
	// Only mapped buffers are wrapped: one of a page and a half.
	const mapped = "weights.file0"
	g.Buffers = append(g.Buffers, graph.Buffer{Name: mapped, Kind: graph.KindMapped, Size: int64(page + page/2)})
	mem, err := r.b.NewMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Wrap("params", make([]byte, page)); err == nil {
		t.Error("a params buffer was wrapped")
	}
	n := 2 * page
	host, err := syscall.Mmap(-1, 0, n+page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skip("no anonymous mmap:", err)
	}
	defer syscall.Munmap(host)
	// mmap returns system pages; take a 16 KiB-aligned window inside.
	off := 0
	for ; off < page; off += 4096 {
		if addr(host[off:])%uintptr(page) == 0 {
			break
		}
	}
	if off+n > len(host) {
		t.Skip("no page-aligned window")
	}
	aligned := host[off : off+n]
	if err := mem.Wrap(mapped, aligned[8:]); err == nil || !strings.Contains(err.Error(), "start on a") {
		t.Errorf("an unaligned start was wrapped (err %v)", err)
	}
	if err := mem.Wrap(mapped, aligned[:n-8]); err == nil || !strings.Contains(err.Error(), "whole pages") {
		t.Errorf("a partial page was wrapped (err %v)", err)
	}
	if err := mem.Wrap(mapped, aligned); err != nil {
		t.Fatal(err)
	}
	b, err := mem.Bytes(graph.Range{Buffer: mapped, Size: 4})
	if err != nil || &b[0] != &aligned[0] {
		t.Error("the wrapped memory is not what Bytes returns")
	}
	if _, err := r.b.Compile(g, mem); err != nil {
		t.Fatal(err)
	}
}

func TestKeepAlive(t *testing.T) {
	g := flashNextGraph(t, 1)
	r := newRig(t, metal.Options{KeepAlive: 200 * time.Millisecond}, nil, g)
	if err := r.progs[1].Run(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for keepAliveWindows(r.rec.Ops()) < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := keepAliveWindows(r.rec.Ops()); n < 3 {
		t.Fatalf("%d keep-alive command buffers after a window", n)
	}
	if err := r.progs[1].Run(); err != nil {
		t.Fatal(err)
	}
	// Windows and keep-alive buffers never overlap.
	open := false
	for i, o := range r.rec.Ops() {
		switch o.Kind {
		case metal.OpBeginWindow:
			if open {
				t.Fatalf("op %d: a command buffer begins inside another", i)
			}
			open = true
		case metal.OpEndWindow:
			open = false
		}
	}
	if srcs := r.rec.Sources(); len(srcs) != 2 || !strings.Contains(srcs[1], "strata_keepalive") {
		t.Error("the keep-alive kernel was not compiled")
	}
}

// keepAliveWindows counts committed command buffers of one dispatch.
func keepAliveWindows(ops []metal.Op) int {
	n, dispatches := 0, 0
	for _, o := range ops {
		switch o.Kind {
		case metal.OpBeginWindow:
			dispatches = 0
		case metal.OpDispatch:
			dispatches++
		case metal.OpCommit:
			if dispatches == 1 {
				n++
			}
		}
	}
	return n
}

func TestCloseReleasesEverything(t *testing.T) {
	g1, g4 := flashNextGraph(t, 1), flashNextGraph(t, 4)
	k, err := metal.KernelsFrom(flashNextModel(t))
	if err != nil {
		t.Fatal(err)
	}
	rec := metal.NewRecorder()
	b, err := metal.New(rec, k, metal.Options{ICB: true, KeepAlive: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	mem, err := b.NewMemory(g1, g4)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Compile(g1, mem)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Compile(g4, mem); err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	b.Close()
	b.Close()
	if n := rec.Live(); n != 0 {
		t.Errorf("%d objects left after Close", n)
	}
	if err := p.Run(); err == nil {
		t.Error("Run after Close succeeded")
	}
}

func TestOpenOffMac(t *testing.T) {
	if runtime.GOOS == "darwin" && runtime.GOARCH == "arm64" {
		t.Skip("on a Mac Open reaches Metal")
	}
	if _, err := metal.Open(metal.Kernels{}, metal.Options{}); err == nil || !strings.Contains(err.Error(), "darwin/arm64") {
		t.Errorf("Open off a Mac: %v", err)
	}
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
