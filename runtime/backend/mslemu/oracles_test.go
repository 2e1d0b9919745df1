package mslemu_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/runtime/engine"
)

// TestMSLEmuOracles: the generated MSL, run on the CPU by the lane emulator,
// reproduces the HF float64 oracles at the cpu backend's tolerances: a full
// prefill of the reference tokens and of the greedy path (every row's
// logits), then the 16-token prompt decoded one row at a time, token for
// token. The slowest oracle runs only without -short.
func TestMSLEmuOracles(t *testing.T) {
	const prompt = 16
	for _, o := range e2e.Oracles {
		t.Run(o.Name, func(t *testing.T) {
			if testing.Short() && o.Name == "tiny-k512" {
				t.Skip("-short: tiny-k512 (512 experts) through mslemu is the slowest oracle")
			}
			ref := e2e.Ref(t, o.Name)
			opt := e2e.MSLEmuOptions(t)
			opt.AllLogits, opt.PrefillRows = true, len(ref.Tokens)
			start := time.Now()
			l, _ := e2e.OpenOracle(t, o.Name, opt)
			loaded := time.Since(start)
			start = time.Now()
			w1 := e2e.CheckLogits(t, "tokens", e2e.RunLogits(t, l, ref.Tokens, len(ref.Tokens)), ref.Logits, o.Tol)
			w2 := e2e.CheckLogits(t, "greedy_tokens", e2e.RunLogits(t, l, ref.Greedy, len(ref.Greedy)), ref.GreedyLogits, o.Tol)
			prefill := time.Since(start)

			start = time.Now()
			w3, n := e2e.CheckGreedyDecode(t, l, ref, prompt, prompt, o.Tol)
			t.Logf("worst per-position relative L2: tokens %.3g, greedy %.3g, decode %.3g; load+build %v, two %d-row prefills %v, %d+%d decode %v",
				w1, w2, w3, loaded.Round(time.Millisecond), len(ref.Tokens), prefill.Round(time.Millisecond), prompt, n, time.Since(start).Round(time.Millisecond))
		})
	}
}

// sanitizerEmulator builds the kernels of am with a sanitizer; it skips when
// clang's sanitizer runtime is missing, unless STRATA_REQUIRE_CLANG is set.
func sanitizerEmulator(t *testing.T, am *artifact.Artifact, sanitize string) *mslemu.Emulator {
	t.Helper()
	e, err := mslemu.New(am, mslemu.Options{Sanitize: sanitize})
	if err != nil {
		if strings.Contains(err.Error(), "libclang_rt") && os.Getenv("STRATA_REQUIRE_CLANG") == "" {
			t.Skipf("skipping the %s sanitizer: clang's sanitizer runtime is missing (apt-get install libclang-rt-dev): %v", sanitize, err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// withSource is am with kernels.metal replaced.
func withSource(am *artifact.Artifact, src string) *artifact.Artifact {
	edited := *am
	edited.Files = artifact.MapFS{artifact.KernelsFile: []byte(src)}
	return &edited
}

// TestMSLEmuSanitizersClean: the tiny-a kernels run clean under
// ThreadSanitizer and AddressSanitizer (with every byte outside a
// dispatch's declared ranges poisoned) and still match the oracle.
func TestMSLEmuSanitizersClean(t *testing.T) {
	c, graphs, am, src, ref := e2e.TinyA(t)
	for _, san := range []string{mslemu.Thread, mslemu.Address} {
		t.Run(san, func(t *testing.T) {
			got, err := e2e.Prefill16(c, graphs, src, sanitizerEmulator(t, am, san), ref)
			if err != nil {
				t.Fatal(err)
			}
			e2e.CheckLogits(t, san, got, ref.Logits[:16], 1e-4)
		})
	}
}

// TestMSLEmuCatchesMissingBarrier: with the threadgroup_barrier taken out of
// a reduction (the prelude's threadgroup_sum, attention's merge), the
// emulator gives wrong logits, or NaN ones the engine refuses (the
// simdgroup that runs ahead reads the NaN-filled threadgroup memory the
// others have not written yet), and ThreadSanitizer reports the race in
// that function.
func TestMSLEmuCatchesMissingBarrier(t *testing.T) {
	c, graphs, am, src, ref := e2e.TinyA(t)
	text, err := am.Source()
	if err != nil {
		t.Fatal(err)
	}
	const barrier = "    threadgroup_barrier(mem_flags::mem_threadgroup);\n"
	for _, tc := range []struct{ function, before string }{
		{"threadgroup_sum", "        scratch[sg] = v;\n    }\n"},
		{"attention", "        part_acc[(sg * attn_dims_per_lane + dd) * simd_width + lane] = acc[dd];\n    }\n"},
	} {
		t.Run(tc.function, func(t *testing.T) {
			if n := strings.Count(string(text), tc.before+barrier); n != 1 {
				t.Fatalf("the barrier after %q appears %d times in kernels.metal, expected once", tc.before, n)
			}
			broken := withSource(am, strings.Replace(string(text), tc.before+barrier, tc.before, 1))
			e, err := mslemu.New(broken, mslemu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			got, err := e2e.Prefill16(c, graphs, src, e, ref)
			worst := 0.0
			switch {
			case errors.Is(err, engine.ErrNonFinite): // the engine refuses the NaN logits the race leaves
				worst = math.NaN()
			case err != nil:
				t.Fatal(err)
			}
			for i := range got {
				e := e2e.RelL2(got[i], ref.Logits[i])
				if math.IsNaN(e) || e > worst {
					worst = e
				}
			}
			if !(worst > 1e-4) && !math.IsNaN(worst) {
				t.Errorf("without the barrier the logits are still within 1e-4 of the reference (worst %.3g)", worst)
			}
			_, err = e2e.Prefill16(c, graphs, src, sanitizerEmulator(t, broken, mslemu.Thread), ref)
			if err == nil || !strings.Contains(err.Error(), "ThreadSanitizer: data race") || !strings.Contains(err.Error(), tc.function) {
				t.Errorf("ThreadSanitizer did not report the race in %s: %v", tc.function, err)
			}
			t.Logf("without the barrier: worst relative L2 %.3g; ThreadSanitizer: %s", worst, firstLines(err, 4))
		})
	}
}

// TestMSLEmuCatchesStrayRead: a matmul that decodes one weight row past its
// tensor stays inside the weights buffer, so only AddressSanitizer with the
// dispatch's declared ranges can see it: the scalar path of 4-row windows
// and the matrix-unit path of a 16-row prefill, each broken in turn.
func TestMSLEmuCatchesStrayRead(t *testing.T) {
	c, graphs, am, src, ref := e2e.TinyA(t)
	text, err := am.Source()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		path, code, fault string
		rows              int
	}{
		// The row bound let through one row more.
		{"scalar", "            if (first + i < n) {\n                f32_decode(", "            if (first + i <= n) {\n                f32_decode(", 4},
		// Every row of a tile decoded from the next (the matrices' n are
		// whole tiles here, so a bound off by one would never be reached).
		{"matrix units", "f32_decode(w + ulong(o0 + o) * row_bytes", "f32_decode(w + ulong(o0 + o + 1) * row_bytes", 16},
	} {
		if n := strings.Count(string(text), k.code); n != 1 {
			t.Fatalf("%s: %q appears %d times in kernels.metal, expected once", k.path, k.code, n)
		}
		broken := withSource(am, strings.Replace(string(text), k.code, k.fault, 1))
		_, err = e2e.PrefillIn(c, graphs, src, sanitizerEmulator(t, broken, mslemu.Address), ref, k.rows)
		if err == nil || !strings.Contains(err.Error(), "AddressSanitizer: use-after-poison") || !strings.Contains(err.Error(), "matmul_f32") {
			t.Errorf("%s: AddressSanitizer did not report the read past the weights: %v", k.path, err)
		}
		t.Logf("%s: AddressSanitizer: %s", k.path, firstLines(err, 4))
	}
}

func firstLines(err error, n int) string {
	if err == nil {
		return "no error"
	}
	lines := strings.Split(err.Error(), "\n")
	return strings.Join(lines[:min(n, len(lines))], " | ")
}

// TestMSLEmuLayerMajorPrefill: the generated MSL streams tiny-a's experts
// through an arena of 17 of 64, its 16-token prompt in four windows
// prefilled layer by layer (the emulator running each window's segments
// between host points): HF's greedy tokens, and the logits of the
// window-major run and of the resident run bit for bit.
func TestMSLEmuLayerMajorPrefill(t *testing.T) {
	const rows, prompt = 5, 16
	opt := e2e.MSLEmuOptions(t)
	opt.AllLogits, opt.PrefillRows = true, rows
	base, ref := e2e.OpenOracle(t, "tiny-a", opt)
	wantT, wantL := e2e.DecodeAll(t, base, ref.Greedy[:prompt], 2)
	var read [2]int64
	for i, wm := range []bool{false, true} {
		o := opt
		o.ArenaExperts, o.WindowMajor = 17, wm
		l, _ := e2e.OpenOracle(t, "tiny-a", o)
		e2e.CheckGreedyDecode(t, l, ref, prompt, rows, 1e-4)
		gotT, gotL := e2e.DecodeAll(t, l, ref.Greedy[:prompt], 2)
		e2e.SameRun(t, fmt.Sprintf("mslemu, window-major %v", wm), gotT, wantT, gotL, wantL)
		read[i] = l.Model.StreamStats().BytesRead
	}
	if read[0] >= read[1] {
		t.Errorf("layer-major read %d bytes of experts, window-major %d", read[0], read[1])
	}
}
