package cuda

import (
	"testing"

	"github.com/strata-llm/strata/artifact"
	_ "github.com/strata-llm/strata/generated/q4-a"
	_ "github.com/strata-llm/strata/generated/qwen3-next-80b-a3b"
	_ "github.com/strata-llm/strata/generated/qwen38-flash-next"
	_ "github.com/strata-llm/strata/generated/tiny-a"
	_ "github.com/strata-llm/strata/generated/tiny-k512"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
)

// TestSharedDeclarations: a threadgroup that starts a declaration becomes
// __shared__; one in a pointer type, a cast, a comment or a longer name
// stays (the prelude defines it away).
func TestSharedDeclarations(t *testing.T) {
	src := `inline float f(threadgroup float *s, uint i) { return ((threadgroup const float *)s)[i]; }
kernel void k() {
    // the threadgroup; threadgroup x
    threadgroup float scratch[8];
    /* c */ threadgroup atomic_uint hist[4];
    threadgroup_barrier(mem_flags::mem_threadgroup);
}`
	want := `inline float f(threadgroup float *s, uint i) { return ((threadgroup const float *)s)[i]; }
kernel void k() {
    // the threadgroup; threadgroup x
    __shared__ float scratch[8];
    /* c */ __shared__ atomic_uint hist[4];
    threadgroup_barrier(mem_flags::mem_threadgroup);
}`
	if got := string(SharedDeclarations([]byte(src))); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestGeneratedPipelinesCompile: with libnvrtc present (STRATA_NVRTC names
// it; CI has none and skips), one pipeline of every kernel of every
// generated model compiles through the prelude for sm_90 (no GPU needed;
// the threadgroup-memory limit is checked when a GPU loads them).
func TestGeneratedPipelinesCompile(t *testing.T) {
	major, minor, err := NVRTCVersion()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	t.Logf("NVRTC %d.%d", major, minor)
	for _, name := range artifact.Names() {
		m, err := artifact.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := CompileAll(m, 9, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d kernels compiled", name, n)
	}
}

// TestClangChecksPrelude: without NVRTC or a GPU, clang's CUDA mode
// type-checks every generated model's kernels.metal through the prelude,
// each kernel wrapped from its metadata (skipped where no clang is found).
func TestClangChecksPrelude(t *testing.T) {
	clang, err := mslemu.Clang()
	if err != nil {
		t.Skip(err)
	}
	for _, name := range artifact.Names() {
		m, err := artifact.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		n, err := ClangCheck(m, clang)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d kernels type-checked", name, n)
	}
}
