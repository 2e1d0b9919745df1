package mslemu_test

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
)

// requireClang skips when no clang can build the emulator, unless
// STRATA_REQUIRE_CLANG is set (CI sets it).
func requireClang(t *testing.T) {
	t.Helper()
	if _, err := mslemu.Clang(); errors.Is(err, mslemu.ErrNoClang) {
		if os.Getenv("STRATA_REQUIRE_CLANG") != "" {
			t.Fatal("STRATA_REQUIRE_CLANG is set but " + err.Error())
		}
		t.Skip("skipping mslemu: " + err.Error())
	}
}

// probeSource exercises the emulator's Metal semantics. Every thread writes
// 16 results; threadgroups of 40 threads have a full simdgroup and one of 8
// lanes.
const probeSource = `#include <metal_stdlib>
using namespace metal;
constant uint fc_probe_scale [[function_constant(100)]];
constant bool fc_probe_flag [[function_constant(101)]];
constant uint fc_probe_extra [[function_constant(102)]];
constant uint probe_extra = is_function_constant_defined(fc_probe_extra) ? fc_probe_extra : 7u;

inline uint tg_total(uint v, threadgroup uint *part, uint lane, uint sg, uint nsg) {
    v = simd_sum(v);
    if (lane == 0) {
        part[sg] = v;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    uint s = 0;
    for (uint i = 0; i < nsg; i++) {
        s += part[i];
    }
    return s;
}

kernel void probe(
    constant uint *params [[buffer(0)]],
    device float *f [[buffer(1)]],
    device uint *u [[buffer(2)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint ntg [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]],
    uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup uint part[4];
    threadgroup float never[2];
    const uint at = (tgpig.x * ntg + tid) * 16;
    const float v = float(tid + 1) * 0.5f;
    const uint w = tid * 3u + tgpig.x;
    f[at + 0] = simd_sum(v);
    f[at + 1] = simd_max(v);
    f[at + 2] = simd_min(v);
    f[at + 3] = simd_prefix_exclusive_sum(v);
    f[at + 4] = simd_prefix_inclusive_sum(v);
    f[at + 5] = simd_shuffle_xor(v, ushort(1));
    f[at + 6] = simd_shuffle_down(v, ushort(3));
    f[at + 7] = simd_broadcast(v, ushort(2));
    f[at + 8] = simd_broadcast_first(v);
    if (params[0] == 12345u) {
        never[1] = float(params[2]); // never runs (a variable nobody stores to would be folded away)
    }
    f[at + 9] = never[params[1]]; // threadgroup memory nobody wrote: NaN
    u[at + 0] = simd_sum(w);
    u[at + 1] = simd_max(w);
    u[at + 2] = simd_prefix_exclusive_sum(w);
    u[at + 3] = simd_any(lane == 5u) ? 1u : 0u;
    u[at + 4] = simd_all(lane < 100u) ? 1u : 0u;
    u[at + 5] = tg_total(w, part, lane, sg, nsg);
    u[at + 6] = fc_probe_scale * params[0] + (fc_probe_flag ? 1000u : 0u) + probe_extra;
    u[at + 7] = lane + 100u * sg + 10000u * nsg;
    u[at + 8] = as_type<uint>(float(as_type<half>(ushort(0x3c01))));
}

// Returns before a barrier the other threads reach: undefined on a GPU.
kernel void early_return(
    constant uint *params [[buffer(0)]],
    device float *f [[buffer(1)]],
    device uint *u [[buffer(2)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint ntg [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]],
    uint nsg [[simdgroups_per_threadgroup]])
{
    if (tid == 3u) {
        return;
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    u[tid] = 1u;
}

// A SIMD-group function only half the lanes reach together.
kernel void divergent(
    constant uint *params [[buffer(0)]],
    device float *f [[buffer(1)]],
    device uint *u [[buffer(2)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint ntg [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]],
    uint nsg [[simdgroups_per_threadgroup]])
{
    f[tid] = lane < 16u ? simd_sum(1.0f) : simd_max(2.0f);
}

// A simdgroup matrix product on a simdgroup of 8 lanes: undefined.
kernel void matrix_partial(
    constant uint *params [[buffer(0)]],
    device float *f [[buffer(1)]],
    device uint *u [[buffer(2)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint ntg [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]],
    uint nsg [[simdgroups_per_threadgroup]])
{
    simdgroup_float8x8 d = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
    simdgroup_multiply_accumulate(d, d, d, d);
    f[tid] = 1.0f;
}

// Simdgroup 1 splits between two barriers: nobody can go on.
kernel void stuck(
    constant uint *params [[buffer(0)]],
    device float *f [[buffer(1)]],
    device uint *u [[buffer(2)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint ntg [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]],
    uint nsg [[simdgroups_per_threadgroup]])
{
    if (sg == 0u || lane == 0u) {
        threadgroup_barrier(mem_flags::mem_threadgroup);
    } else {
        simdgroup_barrier(mem_flags::mem_none);
    }
    f[tid] = 1.0f;
}
`

func probeModel() *artifact.Artifact {
	bufs := []artifact.Buffer{
		{Slot: 0, Name: "params", Type: "uint", Space: "constant"},
		{Slot: 1, Name: "f", Type: "float", Space: "device", Write: true},
		{Slot: 2, Name: "u", Type: "uint", Space: "device", Write: true},
	}
	kernel := func(name string, consts ...int) artifact.Kernel {
		return artifact.Kernel{Name: name, Family: "probe", Buffers: bufs, ArgsSlot: -1, Constants: consts}
	}
	return &artifact.Artifact{
		Name:  "probe",
		Files: fstest.MapFS{artifact.KernelsFile: &fstest.MapFile{Data: []byte(probeSource)}},
		Constants: []artifact.FunctionConstant{
			{Index: 100, Family: "probe", Name: "scale", Type: artifact.UInt},
			{Index: 101, Family: "probe", Name: "flag", Type: artifact.Bool},
			{Index: 102, Family: "probe", Name: "extra", Type: artifact.UInt, Optional: true, Default: 7},
		},
		Kernels: []artifact.Kernel{kernel("probe", 100, 101, 102), kernel("early_return"), kernel("divergent"), kernel("stuck"), kernel("matrix_partial")},
	}
}

const probeThreads, probeGroups = 40, 2

func probeGraph(kernel string, consts ...graph.Const) *graph.Graph {
	n := int64(probeThreads * probeGroups * 16 * 4)
	return &graph.Graph{
		Model: "probe", Kind: graph.KindTrunk, Rows: 1, LogitRows: 1,
		Buffers: []graph.Buffer{{Name: "params", Kind: graph.KindParams, Size: 16}, {Name: "act", Kind: graph.KindScratch, Size: 2 * n}},
		Dispatches: []graph.Dispatch{{
			Kernel: kernel, Family: "probe", Layer: -1, Consts: consts,
			Grid: [3]int{probeGroups, 1, 1}, Threadgroup: [3]int{probeThreads, 1, 1},
			Args: []graph.Binding{
				{Slot: 0, Name: "params", Access: graph.Read, Range: graph.Range{Buffer: "params", Size: 16}},
				{Slot: 1, Name: "f", Access: graph.Write, Range: graph.Range{Buffer: "act", Size: n}},
				{Slot: 2, Name: "u", Access: graph.Write, Range: graph.Range{Buffer: "act", Offset: n, Size: n}},
			},
		}},
	}
}

func runProbe(t *testing.T, e *mslemu.Emulator, g *graph.Graph) ([]float32, []uint32, error) {
	t.Helper()
	mem, err := e.NewMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	backend.Uint32s(mem.Buffer("params"))[0] = 3
	p, err := e.Compile(g, mem)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run()
	act := mem.Buffer("act")
	return backend.Float32s(act[:len(act)/2]), backend.Uint32s(act[len(act)/2:]), err
}

// TestEmulatorSemantics: the SIMD-group functions over full and partial
// simdgroups, threadgroup barriers and memory, function constants (an
// optional one defaulted) and half conversions, against values computed
// here.
func TestEmulatorSemantics(t *testing.T) {
	requireClang(t)
	e, err := mslemu.New(probeModel(), mslemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	f, u, err := runProbe(t, e, probeGraph("probe", graph.Const{Name: "scale", Value: 5}, graph.Const{Name: "flag", Value: 1}))
	if err != nil {
		t.Fatal(err)
	}
	for g := 0; g < probeGroups; g++ {
		var groupTotal uint32
		for tid := 0; tid < probeThreads; tid++ {
			groupTotal += uint32(tid*3 + g)
		}
		for tid := 0; tid < probeThreads; tid++ {
			lane, sg := tid%32, tid/32
			first := sg * 32
			n := min(32, probeThreads-first) // lanes of this simdgroup
			v := func(l int) float32 { return float32(first+l+1) * 0.5 }
			w := func(l int) uint32 { return uint32((first+l)*3 + g) }
			var sum, excl, incl float32
			var usum, umax, uexcl uint32
			for l := 0; l < n; l++ {
				sum += v(l)
				usum += w(l)
				umax = max(umax, w(l))
				if l < lane {
					excl += v(l)
					uexcl += w(l)
				}
				if l <= lane {
					incl += v(l)
				}
			}
			down := v(lane)
			if lane+3 < n {
				down = v(lane + 3)
			}
			wantF := []float32{sum, v(n - 1), v(0), excl, incl, v(lane ^ 1), down, v(2), v(0)}
			wantU := []uint32{usum, umax, uexcl, 1, 1, groupTotal, 5*3 + 1000 + 7, uint32(lane + 100*sg + 10000*2), math.Float32bits(1.0009765625)}
			if lane^1 >= n {
				wantF[5] = float32(math.NaN()) // a lane that does not exist
			}
			if n <= 5 {
				wantU[3] = 0
			}
			at := (g*probeThreads + tid) * 16
			for i, want := range wantF {
				got := f[at+i]
				if got != want && !(math.IsNaN(float64(want)) && math.IsNaN(float64(got))) {
					t.Errorf("threadgroup %d thread %d: float result %d is %g, want %g", g, tid, i, got, want)
				}
			}
			if !math.IsNaN(float64(f[at+9])) {
				t.Errorf("threadgroup %d thread %d: unwritten threadgroup memory reads %g, want NaN", g, tid, f[at+9])
			}
			for i, want := range wantU {
				if got := u[at+i]; got != want {
					t.Errorf("threadgroup %d thread %d: uint result %d is %d, want %d", g, tid, i, got, want)
				}
			}
		}
	}
}

// TestEmulatorSimdgroupMatrix: the lane emulator's SIMD-group matrices
// give e2e.MatrixSource's products exactly (a broken load, store or
// product fails here; the CUDA suite runs the same kernel on the GPU).
func TestEmulatorSimdgroupMatrix(t *testing.T) {
	requireClang(t)
	e, err := mslemu.New(e2e.MatrixArtifact(), mslemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	e2e.RunMatrix(t, e)
}

// TestEmulatorRefusesUndefined: what Metal leaves undefined is an error
// naming the problem, and a dispatch that lacks a function constant its
// kernel reads is refused at compile time.
func TestEmulatorRefusesUndefined(t *testing.T) {
	requireClang(t)
	e, err := mslemu.New(probeModel(), mslemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for kernel, want := range map[string]string{
		"early_return":   "thread 3 returned before a threadgroup_barrier",
		"divergent":      "must be reached by every live lane of the simdgroup together",
		"stuck":          "waits at a threadgroup barrier that other threads never reach",
		"matrix_partial": "simdgroup_multiply_accumulate with 8 of 32 lanes",
	} {
		_, _, err := runProbe(t, e, probeGraph(kernel))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error containing %q", kernel, err, want)
		}
	}
	g := probeGraph("probe", graph.Const{Name: "flag", Value: 1})
	mem, err := e.NewMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Compile(g, mem); err == nil || !strings.Contains(err.Error(), "function constant scale") {
		t.Errorf("a dispatch without the scale constant compiled: %v", err)
	}
}

var _ fs.FS = fstest.MapFS{}
