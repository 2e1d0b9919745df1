package e2e

import (
	"testing"
	"testing/fstest"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// MatrixSource is a kernels.metal of one kernel that checks a backend's
// rendering of the SIMD-group matrix functions (simdgroup_float8x8): loads
// and stores with row strides, a filled matrix, products accumulated in
// place, and a product used again as each operand (A, B and C). Simdgroup 0
// of each threadgroup computes, from A, B, C in threadgroup memory (rows 12,
// 9 and 8 floats apart):
//
//	D = fill(1); D = A·B + D; D = A·B + D  (2·A·B + 1)
//	E = D·B + C                            (a product as A)
//	F = A·D + E                            (a product as B)
//
// stores F 10 floats a row apart and copies it to f[64·threadgroup…]. The
// values are small integers and halves, so every order of summation and
// any precision at least float's gives them exactly.
const MatrixSource = `#include <metal_stdlib>
using namespace metal;

kernel void matrix(
    constant uint *params [[buffer(0)]],
    device float *f [[buffer(1)]],
    uint3 tgpig [[threadgroup_position_in_grid]],
    uint tid [[thread_index_in_threadgroup]],
    uint ntg [[threads_per_threadgroup]],
    uint lane [[thread_index_in_simdgroup]],
    uint sg [[simdgroup_index_in_threadgroup]],
    uint nsg [[simdgroups_per_threadgroup]])
{
    threadgroup float ma[8 * 12];
    threadgroup float mb[8 * 9];
    threadgroup float mc[8 * 8];
    threadgroup float mf[8 * 10];
    for (uint e = tid; e < 64; e += ntg) {
        const uint i = e / 8;
        const uint j = e % 8;
        ma[i * 12 + j] = float(i) - 0.5f * float(j) + float(tgpig.x);
        mb[i * 9 + j] = float((i * 3 + j * 5) % 7) - 3.0f;
        mc[i * 8 + j] = 0.25f * float(e);
    }
    threadgroup_barrier(mem_flags::mem_threadgroup);
    if (sg == 0u) {
        simdgroup_float8x8 a;
        simdgroup_float8x8 b;
        simdgroup_float8x8 c;
        simdgroup_load(a, ma, 12);
        simdgroup_load(b, mb, 9);
        simdgroup_load(c, mc);
        simdgroup_float8x8 d = make_filled_simdgroup_matrix<float, 8, 8>(1.0f);
        simdgroup_multiply_accumulate(d, a, b, d);
        simdgroup_multiply_accumulate(d, a, b, d);
        simdgroup_float8x8 e;
        simdgroup_multiply_accumulate(e, d, b, c);
        simdgroup_multiply_accumulate(c, a, d, e);
        simdgroup_store(c, mf, 10);
        simdgroup_barrier(mem_flags::mem_threadgroup);
        for (uint i = lane; i < 64; i += 32u) {
            f[tgpig.x * 64 + i] = mf[i / 8 * 10 + i % 8];
        }
    }
}
`

// MatrixGroups is the threadgroups of MatrixGraph, of MatrixThreads
// threads (two simdgroups: the second only waits at the barrier).
const MatrixGroups, MatrixThreads = 2, 64

// MatrixArtifact is the model of MatrixSource.
func MatrixArtifact() *artifact.Artifact {
	bufs := []artifact.Buffer{
		{Slot: 0, Name: "params", Type: "uint", Space: "constant"},
		{Slot: 1, Name: "f", Type: "float", Space: "device", Write: true},
	}
	return &artifact.Artifact{
		Name:      "matrix",
		Files:     fstest.MapFS{artifact.KernelsFile: &fstest.MapFile{Data: []byte(MatrixSource)}},
		Kernels:   []artifact.Kernel{{Name: "matrix", Family: "matrix", Buffers: bufs, ArgsSlot: -1}},
		Pipelines: []artifact.Pipeline{{Kernel: "matrix"}},
	}
}

// MatrixRange is where MatrixGraph's kernel writes F.
var MatrixRange = graph.Range{Buffer: "act", Size: 4 * 64 * MatrixGroups}

// MatrixGraph dispatches MatrixSource's kernel once.
func MatrixGraph() *graph.Graph {
	return &graph.Graph{
		Model: "matrix", Kind: graph.KindTrunk, Rows: 1, LogitRows: 1,
		Buffers: []graph.Buffer{{Name: "params", Kind: graph.KindParams, Size: 16}, {Name: "act", Kind: graph.KindScratch, Size: MatrixRange.Size}},
		Dispatches: []graph.Dispatch{{
			Kernel: "matrix", Family: "matrix", Layer: -1,
			Grid: [3]int{MatrixGroups, 1, 1}, Threadgroup: [3]int{MatrixThreads, 1, 1},
			Args: []graph.Binding{
				{Slot: 0, Name: "params", Access: graph.Read, Range: graph.Range{Buffer: "params", Size: 16}},
				{Slot: 1, Name: "f", Access: graph.Write, Range: MatrixRange},
			},
		}},
	}
}

// RunMatrix runs MatrixGraph on b and checks F of every threadgroup
// against the matrices computed here, element for element.
func RunMatrix(t *testing.T, b backend.Backend) {
	t.Helper()
	g := MatrixGraph()
	mem, err := b.NewMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Compile(g, mem)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(); err != nil {
		t.Fatal(err)
	}
	out, err := mem.Bytes(MatrixRange)
	if err != nil {
		t.Fatal(err)
	}
	f := backend.Float32s(out)
	type mat = [8][8]float32
	mul := func(a, b mat) (p mat) {
		for i := range 8 {
			for j := range 8 {
				for k := range 8 {
					p[i][j] += a[i][k] * b[k][j]
				}
			}
		}
		return p
	}
	add := func(a, b mat) (s mat) {
		for i := range 8 {
			for j := range 8 {
				s[i][j] = a[i][j] + b[i][j]
			}
		}
		return s
	}
	for tg := range MatrixGroups {
		var a, b, c, one mat
		for i := range 8 {
			for j := range 8 {
				a[i][j] = float32(i) - 0.5*float32(j) + float32(tg)
				b[i][j] = float32((i*3+j*5)%7) - 3
				c[i][j] = 0.25 * float32(i*8+j)
				one[i][j] = 1
			}
		}
		ab := mul(a, b)
		d := add(add(ab, ab), one)
		want := add(mul(a, d), add(mul(d, b), c))
		for i := range 8 {
			for j := range 8 {
				if got := f[tg*64+i*8+j]; got != want[i][j] {
					t.Errorf("threadgroup %d: F[%d][%d] = %g, want %g", tg, i, j, got, want[i][j])
				}
			}
		}
	}
}
