package mslemu_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/backend/mslemu"
)

// Every checked-in kernels.metal passes clang -fsyntax-only -Werror against
// the metal_stdlib stand-in.
func TestGeneratedKernelsTypeCheck(t *testing.T) {
	requireClang(t)
	paths, _ := filepath.Glob("../../../generated/*/artifact/kernels.metal")
	if len(paths) == 0 {
		t.Fatal("no generated kernels.metal found: run go generate ./...")
	}
	for _, p := range paths {
		t.Run(filepath.Base(filepath.Dir(filepath.Dir(p))), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := mslemu.TypeCheck(p, src); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The stand-in accepts the MSL we emit and rejects what Metal would: each
// bad snippet must fail, with its diagnostic.
func TestStdlibStandIn(t *testing.T) {
	requireClang(t)
	const head = `#include <metal_stdlib>
using namespace metal;
constant uint fc_n [[function_constant(7)]];
constant bool fc_b [[function_constant(8)]];
constant uint n_or_one = is_function_constant_defined(fc_n) ? fc_n : 1u;
struct args_t { float eps; float3 v; half h; };
static_assert(sizeof(args_t) == 48, "float3 is 16 bytes, 16-aligned");
kernel void k(constant uint *params [[buffer(0)]], device const half4 *h [[buffer(1)]], device float *y [[buffer(2)]],
              constant args_t &args [[buffer(3)]], uint3 tgpig [[threadgroup_position_in_grid]],
              uint lane [[thread_index_in_simdgroup]]) {
    threadgroup float part[4];
    threadgroup atomic_uint hist[4];
    atomic_store_explicit(&hist[lane % 4], 0u, memory_order_relaxed);
    threadgroup_barrier(mem_flags::mem_threadgroup);
    const float4 a = float4(h[lane]);
    const float4 c = float4(a.xy, 1.0f, 2.0f);
    part[lane % 4] = simd_sum(dot(a, c)) + args.eps + as_type<float>(uint(params[0]) << 16);
    if (fc_b) {
        y[tgpig.x] = part[0] + float(n_or_one);
    }
    BODY
}
`
	good := []string{"", "y[1] = simd_shuffle_xor(y[0], 16);", "uint2 u = uint2(3u, 4u); y[2] = float(u.y);",
		"char4 q = as_type<char4>(params[0]); y[3] = float4(q).x;"}
	bad := map[string]string{
		"device const uint *p = params; y[0] = float(p[0]);": "cannot initialize",         // constant → device
		"threadgroup float *p = y; p[0] = 1.0f;":             "cannot initialize",         // device → threadgroup
		"y[0] = 1.0;":                                        "double precision constant", // unsuffixed literal
		"double d = 1.0f; y[0] = float(d);":                  "poisoned",
		"float arr[fc_n]; arr[0] = 1.0f; y[0] = arr[0];":     "not a constant expression", // function constants are not constexpr
		"int x [[foo]] = 1; y[0] = float(x);":                "unknown attribute",
		"y[0] = std::min(1.0f, 2.0f);":                       "undeclared identifier 'std'",
		"y[0] = log1p(1.0f);":                                "undeclared identifier 'log1p'", // not in MSL
		"y[0] = get_global_id(0);":                           "undeclared identifier",         // OpenCL, not MSL
		"float4 q = float4(float2(1.0f)); y[0] = q.x;":       "changes the length",
		"y[0] = strata_undeclared;":                          "undeclared identifier 'strata_undeclared'",
		"y[0] = min(lane, 1);":                               "call to 'min' is ambiguous",
	}
	for i, body := range good {
		if err := mslemu.TypeCheck("good.metal", []byte(strings.Replace(head, "BODY", body, 1))); err != nil {
			t.Errorf("good snippet %d rejected: %v", i, err)
		}
	}
	for body, want := range bad {
		err := mslemu.TypeCheck("bad.metal", []byte(strings.Replace(head, "BODY", body, 1)))
		if err == nil {
			t.Errorf("%q passed the type check", body)
		} else if !strings.Contains(err.Error(), want) {
			t.Errorf("%q: want a diagnostic containing %q, got %v", body, want, err)
		}
	}
}
