package cuda

import (
	"bytes"
	"strings"
	"testing"

	_ "github.com/strata-llm/strata/generated/q4-a"
	_ "github.com/strata-llm/strata/generated/qwen3-next-80b-a3b"
	_ "github.com/strata-llm/strata/generated/qwen38-flash-next"
	_ "github.com/strata-llm/strata/generated/tiny-a"
	_ "github.com/strata-llm/strata/generated/tiny-k512"
	"github.com/strata-llm/strata/runtime/artifact"
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
// generated model compiles through the prelude for sm_90, and none needs
// more threadgroup memory than an Apple GPU has (checked on the device at
// load; here the source is only compiled).
func TestGeneratedPipelinesCompile(t *testing.T) {
	n, err := loadNVRTC()
	if err != nil {
		t.Skipf("no NVRTC: %v", err)
	}
	major, minor := n.Version()
	t.Logf("NVRTC %d.%d (%s)", major, minor, n.path)
	for _, name := range artifact.Names() {
		m, err := artifact.Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		src, err := m.Source()
		if err != nil {
			t.Fatal(err)
		}
		prelude, err := Prelude()
		if err != nil {
			t.Fatal(err)
		}
		headers := map[string][]byte{"kernels.metal": SharedDeclarations(src), "metal_stdlib": prelude}
		done := map[string]bool{}
		for _, p := range m.Pipelines {
			if done[p.Kernel] || testing.Short() && len(done) > 2 {
				continue
			}
			done[p.Kernel] = true
			k, _ := m.Kernel(p.Kernel)
			values := map[int]int64{}
			for _, v := range p.Values {
				values[v.Index] = v.Value
			}
			unit, err := pipelineSource(m, k, values, 256)
			if err != nil {
				t.Fatal(err)
			}
			bin, log, err := n.Compile(unit, "pipeline.cu", headers, compileOptions(9, 0))
			if err != nil {
				t.Fatalf("%s %s: %v", name, p.Key(), err)
			}
			if strings.TrimSpace(log) != "" {
				t.Logf("%s %s: %s", name, p.Kernel, log)
			}
			if !bytes.HasPrefix(bin, []byte("\x7fELF")) {
				t.Fatalf("%s %s: not an ELF cubin", name, p.Kernel)
			}
		}
		t.Logf("%s: %d kernels compiled", name, len(done))
	}
}
