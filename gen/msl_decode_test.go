package gen

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/templates/msl"
)

// TestMSLDecodersEqualGGML compiles every MSL decoder for the CPU (the
// emulator's metal_stdlib, C++ for OpenCL, no FP contraction), runs it over
// the llama.cpp-written blocks of models/quant/testdata and requires ggml's
// own decode bit for bit, on the blocks ggml's quantizer wrote and on random
// blocks, for every quantized format. The decode-only IQ formats run inside
// kernels in TestGGUFIQMix (root), the quantizable ones in
// TestMSLEmuQuantKernels.
func TestMSLDecodersEqualGGML(t *testing.T) {
	requireClangHere(t)
	clang, err := mslemu.Clang()
	if err != nil {
		t.Fatal(err)
	}
	chunks, err := formatChunks(msl.FS)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range chunks {
		if _, err := os.Stat(ggmlCasePath(name)); err == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for name := range chunks {
		if f, err := quant.Lookup(name); err == nil && f.BlockElems > 1 && !slices.Contains(names, name) {
			t.Errorf("the MSL decoder for %s has no ggml test blocks (%s)", name, ggmlCasePath(name))
		}
	}
	base, err := quantLibrary(t, "tiny-a", quantPlans[7])
	if err != nil {
		t.Fatal(err)
	}
	lib := base.only("none") // the prelude and its constants, no kernels
	lib.Formats = names
	src, err := lib.emit(msl.FS)
	if err != nil {
		t.Fatal(err)
	}
	// One entry point: decode chunks [0, n) of a row in format fmt.
	var sw strings.Builder
	for i, name := range names {
		fmt.Fprintf(&sw, "        case %d: %s_decode(row, c, w); break;\n", i, name)
	}
	src = fmt.Appendf(src, `
extern "C" void strata_decode(int fmt, device const uchar *row, uint n, device float *out) {
    for (uint c = 0; c < n; c++) {
        float4 w[4];
        switch (fmt) {
%s        default: return;
        }
        for (uint j = 0; j < 4; j++) {
            out[16 * c + 4 * j + 0] = w[j].x;
            out[16 * c + 4 * j + 1] = w[j].y;
            out[16 * c + 4 * j + 2] = w[j].z;
            out[16 * c + 4 * j + 3] = w[j].w;
        }
    }
}
`, sw.String())
	dir := t.TempDir()
	files := map[string][]byte{"decoders.cl": src, "driver.c": []byte(decodeDriver)}
	headers, err := mslemu.Headers()
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range headers {
		files["include/"+name] = b
	}
	for name, b := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(clang, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("clang %s: %v\n%.3000s", strings.Join(args, " "), err, out)
		}
	}
	run("-c", "-x", "cl", "-cl-std=clc++2021", "-cl-no-stdinc", "-nostdinc", "-Iinclude",
		"-Xclang", "-cl-ext=-cl_khr_fp64,-__opencl_c_fp64,+cl_khr_fp16,+__opencl_c_program_scope_global_variables",
		"-ffp-contract=off", "-O1", "-w", "-o", "decoders.o", "decoders.cl")
	run("-x", "c", "-O1", "-w", "-o", "decode", "driver.c", "-x", "none", "decoders.o", "-lm")
	for i, name := range names {
		t.Run(name, func(t *testing.T) {
			f, err := quant.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			blocks, want := ggmlBlocks(t, name, f)
			var in bytes.Buffer
			binary.Write(&in, binary.LittleEndian, [2]uint32{uint32(i), uint32(len(want) / chunks[name])})
			in.Write(blocks)
			cmd := exec.Command(filepath.Join(dir, "decode"))
			cmd.Stdin = &in
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 4*len(want) {
				t.Fatalf("decoder wrote %d bytes, want %d", len(out), 4*len(want))
			}
			bad := 0
			for j, w := range want {
				if got := binary.LittleEndian.Uint32(out[4*j:]); got != math.Float32bits(w) {
					if bad < 5 {
						t.Errorf("element %d: MSL %g, ggml %g", j, math.Float32frombits(got), w)
					}
					bad++
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d elements differ from ggml", bad, len(want))
			}
		})
	}
}

func ggmlCasePath(name string) string { return "../models/quant/testdata/ggml_" + name + ".bin" }

// ggmlBlocks reads the blocks of testdata/ggml_<name>.bin — those ggml's
// quantizer wrote, then the random ones — and ggml's decode of them
// (layout: models/quant/testdata/README.md).
func ggmlBlocks(t *testing.T, name string, f *quant.Format) ([]byte, []float32) {
	t.Helper()
	raw, err := os.ReadFile(ggmlCasePath(name))
	if err != nil {
		t.Fatal(err)
	}
	u32 := func() int {
		if len(raw) < 4 {
			t.Fatalf("%s: truncated", ggmlCasePath(name))
		}
		v := int(binary.LittleEndian.Uint32(raw))
		raw = raw[4:]
		return v
	}
	var blocks []byte
	var want []float32
	part := func(n int) {
		if len(raw) < f.Bytes(n)+4*n {
			t.Fatalf("%s: truncated", ggmlCasePath(name))
		}
		blocks = append(blocks, raw[:f.Bytes(n)]...)
		raw = raw[f.Bytes(n):]
		for i := 0; i < n; i++ {
			want = append(want, math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:])))
		}
		raw = raw[4*n:]
	}
	n := u32()
	raw = raw[4*n:]     // the inputs
	raw = raw[4*u32():] // the importance matrix
	part(n)
	part(u32())
	if len(raw) != 0 {
		t.Fatalf("%s: %d trailing bytes", ggmlCasePath(name), len(raw))
	}
	return blocks, want
}

// decodeDriver reads (format index, chunks, blocks) on stdin and writes the
// decoded float32s on stdout. The lane emulator's entry points are stubs
// (decoders use no SIMD-group function or matrix); half to float is the exact
// widening the emulator's runtime also supplies.
const decodeDriver = `#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
void __strata_emu_simd(int op, int type, void *value, unsigned arg) { abort(); }
void __strata_emu_barrier(int scope) { abort(); }
unsigned __strata_emu_lane(void) { abort(); }
void __strata_emu_mma(float *d, const float *a, const float *b, const float *c) { abort(); }
uint16_t __gnu_f2h_ieee(float f) { abort(); }
float __gnu_h2f_ieee(uint16_t h) {
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 31, man = h & 1023, bits;
    if (exp == 0 && man == 0) bits = sign;
    else if (exp == 0) { int e = 113; while (!(man & 1024)) { man <<= 1; e--; } bits = sign | (uint32_t)e << 23 | (man & 1023) << 13; }
    else if (exp == 31) bits = sign | 0xff << 23 | man << 13;
    else bits = sign | (exp + 112) << 23 | man << 13;
    float f; memcpy(&f, &bits, 4); return f;
}
void strata_decode(int fmt, const unsigned char *row, unsigned n, float *out);
int main(void) {
    uint32_t hdr[2];
    if (fread(hdr, 4, 2, stdin) != 2) return 1;
    size_t cap = 1 << 16, len = 0;
    unsigned char *in = calloc(cap, 1);
    size_t got;
    while ((got = fread(in + len, 1, cap - len - 64, stdin)) > 0) {
        len += got;
        if (cap - len < 128) { in = realloc(in, 2 * cap); memset(in + cap, 0, cap); cap *= 2; }
    }
    float *out = calloc(16 * (size_t)hdr[1], 4);
    strata_decode((int)hdr[0], in, hdr[1], out);
    fwrite(out, 4, 16 * (size_t)hdr[1], stdout);
    return 0;
}
`
