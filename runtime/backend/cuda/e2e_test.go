package cuda_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/cuda"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// The CUDA backend's end-to-end suite. These tests need an NVIDIA GPU with
// its driver and NVRTC; CI has none and skips them (program_test.go and
// source_test.go check the prelude and the wrapper without a GPU).
// docs/cuda.md says how they were run on the H200 (testdata/h200.sh).

func requireCUDA(t testing.TB) {
	t.Helper()
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA: %v", err)
	}
}

func cudaOptions(t testing.TB, replay bool) load.Options {
	requireCUDA(t)
	return load.Options{Backend: load.BackendCUDA, CUDA: cuda.Options{Direct: !replay}}
}

func cudaOf(t testing.TB, l *load.Loaded) *cuda.Backend {
	t.Helper()
	b, ok := l.Model.Backend().(*cuda.Backend)
	if !ok {
		t.Fatalf("backend %T, not cuda", l.Model.Backend())
	}
	return b
}

// TestCUDABackendOracles: the generated MSL, run on the GPU with each
// barrier group's dispatches on several streams (direct) and replayed from
// CUDA graphs recorded the same way, reproduces the HF float64 oracles: a
// full prefill of the reference tokens (every row's logits) and the greedy
// path decoded one row at a time.
func TestCUDABackendOracles(t *testing.T) {
	const prompt = 16
	for _, o := range e2e.Oracles {
		for _, replay := range []bool{false, true} {
			name := o.Name + "/direct"
			if replay {
				name = o.Name + "/replay"
			}
			t.Run(name, func(t *testing.T) {
				ref := e2e.Ref(t, o.Name)
				opt := cudaOptions(t, replay)
				opt.AllLogits, opt.PrefillRows = true, len(ref.Tokens)
				l, _ := e2e.OpenOracle(t, o.Name, opt)
				b := cudaOf(t, l)
				w1 := e2e.CheckLogits(t, "tokens", e2e.RunLogits(t, l, ref.Tokens, len(ref.Tokens)), ref.Logits, o.Tol)
				start := time.Now()
				w2, n := e2e.CheckGreedyDecode(t, l, ref, prompt, prompt, o.Tol)
				t.Logf("%s: worst per-position relative L2: tokens %.3g, decode %.3g; greedy %d+%d tokens identical; %d pipelines compiled in %v; %v",
					b.Info(), w1, w2, prompt, n, b.Compiled, b.CompileIn.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
			})
		}
	}
}

// TestCUDATinyGo: the trained default model through the generated MSL on the
// GPU, directly and replayed from CUDA graphs, reproduces HF's float64
// trunk and MTP logits and greedy path (e2e.CheckTinyGo's bounds).
func TestCUDATinyGo(t *testing.T) {
	for _, replay := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "replay"}[replay], func(t *testing.T) {
			e2e.CheckTinyGo(t, cudaOptions(t, replay), 64)
		})
	}
}

// TestCUDATinyGoChat: tiny-go-chat, the default chat model, on the GPU,
// directly and replayed from CUDA graphs: every stored trunk and MTP row of
// its reference tool conversation and the greedy tool call
// (e2e.CheckTinyGoChat, tiny-go's bounds).
func TestCUDATinyGoChat(t *testing.T) {
	for _, replay := range []bool{false, true} {
		t.Run(map[bool]string{false: "direct", true: "replay"}[replay], func(t *testing.T) {
			e2e.CheckTinyGoChat(t, cudaOptions(t, replay), 64, 0, true)
		})
	}
}

// TestCUDAPreludeQuantKernels: every quantized storage format's kernels
// (the models TestMSLEmuQuantKernels builds) compile through the CUDA
// prelude with NVRTC for sm_90; no GPU needed, only libnvrtc (CI has none
// and skips).
func TestCUDAPreludeQuantKernels(t *testing.T) {
	if _, _, err := cuda.NVRTCVersion(); err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	_, _, am := e2e.QuantKernelModels(t)
	n, err := cuda.CompileAll(am, 9, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kernels of %d formats compiled", n, len(e2e.QuantFormats()))
}

// TestCUDAClangChecksQuantKernels: the same kernels, every quantized
// format, type-checked through the prelude by clang's CUDA mode: what CI
// runs in place of NVRTC (no CUDA toolkit needed).
func TestCUDAClangChecksQuantKernels(t *testing.T) {
	clang, err := mslemu.Clang()
	if err != nil {
		t.Skip(err)
	}
	_, _, am := e2e.QuantKernelModels(t)
	n, err := cuda.ClangCheck(am, clang)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d kernels of %d formats type-checked", n, len(e2e.QuantFormats()))
}

// TestCUDAQuantGGUF: the oracles converted to GGUF with quantized plans
// (every format among them) give on the GPU the cpu backend's logits
// within the tolerance mslemu is held to, and its greedy tokens.
func TestCUDAQuantGGUF(t *testing.T) {
	requireCUDA(t)
	const prompt, steps = 16, 8
	for _, tc := range e2e.QuantGGUFCases {
		t.Run(tc.Oracle+"/"+tc.Plan, func(t *testing.T) {
			path, _ := e2e.ConvertOracle(t, tc.Oracle, tc.Plan, t.TempDir())
			ref := e2e.Ref(t, tc.Oracle)
			opt := load.Options{AllLogits: true, PrefillRows: len(ref.Tokens)}
			onCPU := e2e.GGUF(t, path, load.GGUFOptions{Options: opt})
			gopt := cudaOptions(t, false)
			gopt.AllLogits, gopt.PrefillRows = true, len(ref.Tokens)
			gpu := e2e.GGUF(t, path, load.GGUFOptions{Options: gopt})
			worst := 0.0
			want := e2e.RunLogits(t, onCPU, ref.Tokens, len(ref.Tokens))
			got := e2e.RunLogits(t, gpu, ref.Tokens, len(ref.Tokens))
			for i := range want {
				if e := e2e.RelL2(got[i], want[i]); !(e <= e2e.QuantLogitsTol) {
					t.Errorf("prefill position %d: relative L2 %.3g between cuda and cpu > %.0e", i, e, e2e.QuantLogitsTol)
				} else {
					worst = math.Max(worst, e)
				}
			}
			decode := func(l *load.Loaded) []int {
				toks, err := l.Model.NewSession().Generate(ref.Tokens[:prompt], steps, engine.GenerateOptions{PrefillRows: prompt})
				if err != nil {
					t.Fatal(err)
				}
				return toks
			}
			if a, b := decode(gpu), decode(onCPU); !slices.Equal(a, b) {
				t.Errorf("greedy tokens %v on cuda, %v on cpu", a, b)
			}
			t.Logf("worst prefill relative L2 vs cpu %.3g; %d greedy tokens equal", worst, steps)
		})
	}
}

// TestCUDABackendStreaming: on the GPU the host points stream the routed
// experts through a 5% arena (the host serves them while the GPU waits on
// the release word), and the tokens and every row's logits are those of
// the fully resident model on the same backend, bit for bit (tiny-k512,
// 512 experts, top-10), direct and replayed.
func TestCUDABackendStreaming(t *testing.T) {
	ref := e2e.Ref(t, "tiny-k512")
	prompt := ref.Tokens[:8]
	const n = 8
	opt := cudaOptions(t, false)
	opt.AllLogits, opt.PrefillRows = true, 4
	base, _ := e2e.OpenOracle(t, "tiny-k512", opt)
	wantT, wantL := e2e.DecodeAll(t, base, prompt, n)
	// The GPU checks residency itself at each host point (by default) or
	// stops at every layer; with a small arena and larger ones, with and
	// without read-ahead (whose windows stop at every layer).
	points := 0
	for _, c := range []struct {
		replay, every, ahead bool
		percent              int
	}{{false, true, false, 5}, {true, true, false, 5}, {false, false, false, 5}, {true, false, false, 5},
		{true, false, false, 60}, {false, false, false, 90}, {true, false, false, 90}, {true, false, true, 60}} {
		opt := cudaOptions(t, c.replay)
		opt.AllLogits, opt.PrefillRows, opt.ArenaExperts = true, 4, 4*512*c.percent/100
		opt.WaitEveryLayer, opt.ReadAhead = c.every, c.ahead
		name := fmt.Sprintf("cuda (replay %v, wait every layer %v, read-ahead %v), %d%% arena", c.replay, c.every, c.ahead, c.percent)
		l, _ := e2e.OpenOracle(t, "tiny-k512", opt)
		gotT, gotL := e2e.DecodeAll(t, l, prompt, n)
		e2e.SameRun(t, name, gotT, wantT, gotL, wantL)
		st := l.Model.StreamStats()
		if c.percent == 5 && st.Misses <= opt.ArenaExperts {
			t.Errorf("%s: a %d-slot arena missed only %d times: the host points never evicted", name, opt.ArenaExperts, st.Misses)
		}
		if (c.every || c.ahead) && st.RanOn != 0 {
			t.Errorf("%s: the GPU ran on past %d host points", name, st.RanOn)
		}
		if points == 0 {
			points = st.HostPoints
		}
		if st.HostPoints+st.RanOn != points {
			t.Errorf("%s: %d host points waited at and %d run past, want %d in all", name, st.HostPoints, st.RanOn, points)
		}
		t.Logf("%s: tokens and logits identical to the resident run; %d misses, %d hits; the GPU waited at %d host points, ran on past %d",
			name, st.Misses, st.Hits, st.HostPoints, st.RanOn)
	}
}

// TestCUDABarrierSoundness: for each oracle's prefill window, on the GPU,
// every schedule the graph allows gives the serial run's logits bit for
// bit (the placed barriers are enough), and deleting each placed barrier in
// turn changes them under the schedule that runs each barrier group
// backwards (the barrier was needed for this input), scratch poisoned
// before every run so no window can lean on values an earlier one left.
// STRATA_CUDA_BARRIERS caps how many barriers are tried per model (a
// sample spread over the window; default all).
func TestCUDABarrierSoundness(t *testing.T) {
	for _, o := range e2e.Oracles {
		t.Run(o.Name, func(t *testing.T) {
			ref := e2e.Ref(t, o.Name)
			opt := cudaOptions(t, false)
			opt.AllLogits, opt.PrefillRows = true, len(ref.Tokens)
			l, _ := e2e.OpenOracle(t, o.Name, opt)
			b := cudaOf(t, l)
			var prog *cuda.Program
			for _, p := range b.Programs() {
				if p.Graph.Kind == graph.KindTrunk && p.Graph.Rows == len(ref.Tokens) {
					prog = p
				}
			}
			if prog == nil {
				t.Fatalf("no trunk program of %d rows", len(ref.Tokens))
			}
			// run is the window's logits under schedule s; nil when the
			// engine refuses them as non-finite (poisoned scratch read
			// where a deleted barrier let a reader run before its writer):
			// that too is the output changing.
			run := func(s cuda.Schedule) [][]float32 {
				b.SetMode(s, false)
				prog.Memory().Poison(graph.KindScratch)
				got, err := e2e.TryLogits(l, ref.Tokens, len(ref.Tokens))
				if errors.Is(err, engine.ErrNonFinite) {
					return nil
				}
				if err != nil {
					t.Fatal(err)
				}
				return got
			}
			serial := run(cuda.Serial)
			e2e.CheckLogits(t, "serial", serial, ref.Logits, o.Tol)
			for _, s := range []cuda.Schedule{cuda.Concurrent, cuda.Reversed} {
				for rep := 0; rep < 3; rep++ {
					if got := run(s); !sameLogits(got, serial) {
						t.Fatalf("%s schedule, run %d: logits differ from the serial run with every barrier placed", s, rep)
					}
				}
			}
			barriers := prog.Barriers()
			tried := barriers
			if v := os.Getenv("STRATA_CUDA_BARRIERS"); v != "" {
				var limit int
				fmt.Sscan(v, &limit)
				if limit > 0 && limit < len(barriers) {
					tried = nil
					for k := 0; k < limit; k++ {
						tried = append(tried, barriers[k*len(barriers)/limit])
					}
				}
			}
			var silentRev, silentConc []string
			for _, i := range tried {
				prog.DropBarrier(i, false)
				rev := run(cuda.Reversed)
				conc := run(cuda.Concurrent)
				prog.DropBarrier(i, true)
				d := &prog.Graph.Dispatches[i]
				where := fmt.Sprintf("%d:%s/L%d", i, d.Kernel, d.Layer)
				if sameLogits(rev, serial) {
					silentRev = append(silentRev, where)
				}
				if sameLogits(conc, serial) {
					silentConc = append(silentConc, where)
				}
			}
			if got := run(cuda.Concurrent); !sameLogits(got, serial) {
				t.Fatal("after restoring every barrier the logits differ")
			}
			t.Logf("%s T=%d: %d dispatches, %d barriers placed, %d deleted one at a time: the output changed for %d under the reversed schedule, %d under the concurrent one",
				o.Name, prog.Graph.Rows, len(prog.Graph.Dispatches), len(barriers), len(tried), len(tried)-len(silentRev), len(tried)-len(silentConc))
			if len(silentRev) > 0 {
				t.Logf("unchanged under the reversed schedule: %s", strings.Join(silentRev, " "))
			}
		})
	}
}

func sameLogits(a, b [][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i]) != len(b[i]) {
			return false
		}
		for j := range a[i] {
			if math.Float32bits(a[i][j]) != math.Float32bits(b[i][j]) {
				return false
			}
		}
	}
	return true
}

// TestCUDATimings times every trunk window shape of the GGUF model
// STRATA_CUDA_SYNTH names (a strata synth model, every expert resident):
// the naive graph (one stream, a barrier after every dispatch), the pruned
// graph (barrier groups on several streams), and both replayed from CUDA
// graphs; then each kernel family's achieved bandwidth (declared bytes read
// plus written over its serial GPU time) against a device-to-device copy
// measured in the same run. Numbers, not assertions: it fails only when a
// run fails. STRATA_CUDA_OUT names a file for the table.
func TestCUDATimings(t *testing.T) {
	path := os.Getenv("STRATA_CUDA_SYNTH")
	if path == "" {
		t.Skip("STRATA_CUDA_SYNTH names no model")
	}
	requireCUDA(t)
	opt := load.GGUFOptions{Options: e2e.WithGenerator(load.Options{Backend: load.BackendCUDA}), Pack: "-"}
	l, err := load.GGUF(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b := cudaOf(t, l)
	var out strings.Builder
	fmt.Fprintf(&out, "%s, model %s (%d layers), %d pipelines compiled in %v\n", b.Info(), l.Config.Name, l.Config.Architecture.NumLayers, b.Compiled, b.CompileIn.Round(time.Millisecond))
	// A real window first: state, cache and params as decoding leaves them.
	if _, err := l.Model.NewSession().Generate([]int{1, 2, 3, 4, 5, 6, 7, 8}, 4, engine.GenerateOptions{PrefillRows: l.PrefillRows}); err != nil {
		t.Fatal(err)
	}
	copyBW, err := b.CopyBandwidth(2<<30, 10)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&out, "device-to-device copy: %.0f GB/s (read + written)\n\n", copyBW/1e9)
	const reps = 20
	for _, p := range b.Programs() {
		g := p.Graph
		if g.Kind != graph.KindTrunk || !(g.Rows == 1 || g.Rows == 4 || g.Rows == l.PrefillRows) {
			continue
		}
		writeWindowParams(t, p, g)
		for round := 1; round <= 2; round++ {
			wp, err := p.Profile(3, reps)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&out, "round %d of 2, GPU times medians of %d after 3 warm-ups; recorded graph %d nodes, %d edges\n", round, reps, p.GraphNodes, p.GraphEdges)
			wp.Write(&out, copyBW)
			out.WriteString("\n")
		}
	}
	t.Log("\n" + out.String())
	if dst := os.Getenv("STRATA_CUDA_OUT"); dst != "" {
		if err := os.WriteFile(dst, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCUDASynthBarrierSoundness is TestCUDABarrierSoundness at real
// dimensions (the model STRATA_CUDA_SYNTH names, its T=4 decode window):
// from one saved state, scratch poisoned, the concurrent and reversed
// schedules give the serial run's logits and state bit for bit, and
// deleting each placed barrier in turn (a sample of STRATA_CUDA_BARRIERS
// if set; only those before the families STRATA_CUDA_FAMILIES lists, if
// set) changes them under the reversed one. The window rewrites the same
// cache rows every run, so the cache needs no restoring; with
// STRATA_CUDA_POS the window sits at that position over a cache filled
// with fixed noise (restored before every run), so sparse attention's
// indexer has more blocks than its top-k to choose from, and the cache the
// window leaves is compared too.
func TestCUDASynthBarrierSoundness(t *testing.T) {
	path := os.Getenv("STRATA_CUDA_SYNTH")
	if path == "" {
		t.Skip("STRATA_CUDA_SYNTH names no model")
	}
	requireCUDA(t)
	l, err := load.GGUF(path, load.GGUFOptions{Options: e2e.WithGenerator(load.Options{Backend: load.BackendCUDA}), Pack: "-"})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b := cudaOf(t, l)
	if _, err := l.Model.NewSession().Generate([]int{1, 2, 3, 4, 5, 6, 7, 8}, 4, engine.GenerateOptions{PrefillRows: l.PrefillRows}); err != nil {
		t.Fatal(err)
	}
	var prog *cuda.Program
	for _, p := range b.Programs() {
		if p.Graph.Kind == graph.KindTrunk && p.Graph.Rows == 4 {
			prog = p
		}
	}
	if prog == nil {
		t.Fatal("no T=4 trunk program")
	}
	g, mem := prog.Graph, prog.Memory()
	pos := 16
	if v := os.Getenv("STRATA_CUDA_POS"); v != "" {
		fmt.Sscan(v, &pos)
		rng := uint32(12345)
		for _, buf := range g.Buffers {
			if buf.Kind != graph.KindCache {
				continue
			}
			f := backend.Float32s(mem.Buffer(buf.Name))
			for i := range f {
				rng = rng*1664525 + 1013904223
				f[i] = float32(int32(rng>>8)-1<<23) / float32(1<<23)
			}
		}
	}
	writeWindowParamsAt(t, prog, g, pos)
	state := mem.Snapshot(graph.KindState, nil)
	cache := mem.Snapshot(graph.KindCache, nil)
	out, err := g.Output(0)
	if err != nil {
		t.Fatal(err)
	}
	run := func(s cuda.Schedule) []byte {
		mem.Restore(state)
		if os.Getenv("STRATA_CUDA_POS") != "" {
			mem.Restore(cache)
		}
		mem.Poison(graph.KindScratch)
		b.SetMode(s, false)
		if err := prog.Run(); err != nil {
			t.Fatal(err)
		}
		logits, err := mem.Bytes(out)
		if err != nil {
			t.Fatal(err)
		}
		res := append([]byte(nil), logits...)
		kinds := []string{graph.KindState}
		if os.Getenv("STRATA_CUDA_POS") != "" {
			kinds = append(kinds, graph.KindCache) // what the next window reads
		}
		for _, kind := range kinds {
			snap := mem.Snapshot(kind, nil)
			names := make([]string, 0, len(snap))
			for k := range snap {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				res = append(res, snap[k]...)
			}
		}
		return res
	}
	serial := run(cuda.Serial)
	for _, s := range []cuda.Schedule{cuda.Concurrent, cuda.Reversed} {
		if got := run(s); !bytesEqual(got, serial) {
			t.Fatalf("%s schedule: logits or state differ from the serial run with every barrier placed", s)
		}
	}
	limit := 0
	if v := os.Getenv("STRATA_CUDA_BARRIERS"); v != "" {
		fmt.Sscan(v, &limit)
	}
	barriers := prog.Barriers()
	if fams := os.Getenv("STRATA_CUDA_FAMILIES"); fams != "" {
		var keep []int
		for _, i := range barriers {
			if slices.Contains(strings.Split(fams, ","), string(g.Dispatches[i].Family)) {
				keep = append(keep, i)
			}
		}
		barriers = keep
	}
	tried := barriers
	if limit > 0 && limit < len(barriers) {
		tried = nil
		for k := 0; k < limit; k++ {
			tried = append(tried, barriers[k*len(barriers)/limit])
		}
	}
	var silent []string
	for _, i := range tried {
		prog.DropBarrier(i, false)
		got := run(cuda.Reversed)
		prog.DropBarrier(i, true)
		if bytesEqual(got, serial) {
			d := &g.Dispatches[i]
			silent = append(silent, fmt.Sprintf("%d:%s/L%d", i, d.Kernel, d.Layer))
		}
	}
	t.Logf("%s T=4 at position %d: %d dispatches, %d barriers placed (of the families asked for), %d deleted one at a time: the output changed for %d under the reversed schedule",
		l.Config.Name, pos, len(g.Dispatches), len(barriers), len(tried), len(tried)-len(silent))
	if len(silent) > 0 {
		t.Logf("unchanged: %s", strings.Join(silent, " "))
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// writeWindowParams fills a window's params as a full window of its rows
// would: every row live, positions after a short context, real token ids.
func writeWindowParams(t *testing.T, p *cuda.Program, g *graph.Graph) {
	t.Helper()
	writeWindowParamsAt(t, p, g, 16)
}

func writeWindowParamsAt(t *testing.T, p *cuda.Program, g *graph.Graph, pos int) {
	t.Helper()
	if err := p.SetWindowParams(pos); err != nil {
		t.Fatal(err)
	}
}
