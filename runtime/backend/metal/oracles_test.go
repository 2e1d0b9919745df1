package metal_test

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/backend/metal"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/load"
)

// TestMetalBackendOracles: what the Metal backend encodes, run dispatch by
// dispatch by the emulator, reproduces the HF float64 oracles: a full
// prefill of the reference tokens (every row's logits) and the greedy path
// decoded one row at a time, with the commands encoded directly and
// replayed from indirect command buffers.
func TestMetalBackendOracles(t *testing.T) {
	const prompt = 16
	for _, o := range e2e.Oracles {
		for _, icb := range []bool{false, true} {
			name := o.Name + "/direct"
			if icb {
				name = o.Name + "/icb"
			}
			t.Run(name, func(t *testing.T) {
				if o.Name == "tiny-k512" && (testing.Short() || icb) {
					t.Skip("tiny-k512 (512 experts) through the emulator is the slowest oracle: once, without -short")
				}
				ref := e2e.Ref(t, o.Name)
				opt := e2e.MetalEmuOptions(t, icb)
				opt.AllLogits, opt.PrefillRows = true, len(ref.Tokens)
				l, _ := e2e.OpenOracle(t, o.Name, opt)
				w1 := e2e.CheckLogits(t, "tokens", e2e.RunLogits(t, l, ref.Tokens, len(ref.Tokens)), ref.Logits, o.Tol)

				start := time.Now()
				w2, n := e2e.CheckGreedyDecode(t, l, ref, prompt, prompt, o.Tol)
				t.Logf("worst per-position relative L2: tokens %.3g, decode %.3g; %d+%d decode %v", w1, w2, prompt, n, time.Since(start).Round(time.Millisecond))
			})
		}
	}
}

// TestMetalBackendStreaming: on the Metal backend the host points stream
// the routed experts through a 5% arena, and the tokens and every row's
// logits are those of the fully resident model on the same backend, bit
// for bit (tiny-k512, 512 experts, top-10).
func TestMetalBackendStreaming(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: tiny-k512 through the emulator")
	}
	ref := e2e.Ref(t, "tiny-k512")
	prompt := ref.Tokens[:8]
	const n = 8
	opt := e2e.MetalEmuOptions(t, false)
	opt.AllLogits, opt.PrefillRows = true, 4
	base, _ := e2e.OpenOracle(t, "tiny-k512", opt)
	wantT, wantL := e2e.DecodeAll(t, base, prompt, n)

	for _, icb := range []bool{false, true} {
		opt := e2e.MetalEmuOptions(t, icb)
		opt.AllLogits, opt.PrefillRows, opt.ArenaExperts = true, 4, 4*512*5/100
		l, _ := e2e.OpenOracle(t, "tiny-k512", opt)
		gotT, gotL := e2e.DecodeAll(t, l, prompt, n)
		e2e.SameRun(t, fmt.Sprintf("metal (ICB %v), 5%% arena", icb), gotT, wantT, gotL, wantL)
		st := l.Model.StreamStats()
		if st.Misses <= opt.ArenaExperts {
			t.Errorf("a %d-slot arena missed only %d times: the host points never evicted", opt.ArenaExperts, st.Misses)
		}
		t.Logf("ICB %v: %d hits, %d misses, %.1f MB read", icb, st.Hits, st.Misses, float64(st.BytesRead)/1e6)
	}
}

// The real Metal device exists only on darwin/arm64; elsewhere asking for it
// is a clear error, not a crash.
func TestMetalBackendElsewhere(t *testing.T) {
	if _, err := metal.Open(metal.Kernels{}, metal.Options{}); err == nil {
		t.Skip("a Metal device is present")
	}
	_, err := load.HF(e2e.OracleDir("tiny-a"), e2e.WithGenerator(load.Options{Backend: load.BackendMetal}))
	if err == nil || !strings.Contains(err.Error(), "darwin/arm64") {
		t.Fatalf("opening tiny-a on the metal backend off a Mac: %v, want an error naming darwin/arm64", err)
	}
}

// The check above can fail: a GPU that skips one kind of dispatch (every
// final-norm launch) or runs one with a wrong function constant moves the
// logits far past the tolerance, or fails the window.
func TestMetalEmuCatchesWrongExecution(t *testing.T) {
	c, graphs, am, src, ref := e2e.TinyA(t)
	k, err := metal.KernelsFrom(am)
	if err != nil {
		t.Fatal(err)
	}
	want, err := e2e.Prefill16(c, graphs, src, cpu.Backend, ref)
	if err != nil {
		t.Fatal(err)
	}
	for _, mutation := range []string{"none", "skip", "constant"} {
		rec, err := load.EmulatedMetal(am, mslemu.Options{})
		if err != nil {
			t.Fatal(err)
		}
		run := rec.Execute
		rec.Execute = func(l metal.Launch) error {
			if strings.HasPrefix(l.Function.Name, "rmsnorm") {
				switch mutation {
				case "skip":
					return nil
				case "constant": // the row width, one less
					l.Function.Constants = slices.Clone(l.Function.Constants)
					for i := range l.Function.Constants {
						if l.Function.Constants[i].Value > 8 {
							l.Function.Constants[i].Value--
							break
						}
					}
				}
			}
			return run(l)
		}
		b, err := metal.New(rec, k, metal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := e2e.Prefill16(c, graphs, src, b.Engine(), ref)
		b.Close()
		worst := 0.0
		for i := range want {
			if err == nil {
				worst = max(worst, e2e.RelL2(got[i], want[i]))
			}
		}
		switch {
		case mutation == "none" && (err != nil || worst > 1e-4):
			t.Fatalf("unmutated: error %v, worst relative L2 %.3g against the cpu backend", err, worst)
		case mutation != "none" && err == nil && worst < 1e-2:
			t.Errorf("%s: the run passed (worst relative L2 %.3g)", mutation, worst)
		}
		t.Logf("%s: error %v, worst relative L2 vs the cpu backend %.3g", mutation, err, worst)
	}
}

// Cache-aware routing (MoCE, with read-ahead) runs in the router's MSL on the
// Metal backend while experts stream through a 5% arena, and stays
// independent of I/O timing: runs with different reader threads and random
// read delays give the same tokens.
func TestMetalBackendMoCE(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: tiny-k512 through the emulator")
	}
	ref := e2e.Ref(t, "tiny-k512")
	prompt := ref.Tokens[:8]
	const n = 6
	var first []int
	for run, threads := range []int{8, 1, 3} {
		opt := e2e.MetalEmuOptions(t, run == 2)
		opt.PrefillRows, opt.ArenaExperts, opt.MoCE, opt.ReadAhead = 4, 4*512*5/100, true, true
		opt.Stream = stream.Options{Threads: threads}
		opt.WrapReader = func(r stream.Reader) stream.Reader {
			return &e2e.Delayed{Inner: r, Rng: rand.New(rand.NewSource(int64(run))), MaxDelay: 2 * time.Millisecond}
		}
		l, _ := e2e.OpenOracle(t, "tiny-k512", opt)
		got, _ := e2e.DecodeAll(t, l, prompt, n)
		st := l.Model.StreamStats()
		t.Logf("run %d, %d threads: %v; %d hits, %d misses, %d read-aheads", run, threads, got, st.Hits, st.Misses, st.Prefetched)
		if run == 0 {
			first = got
			continue
		}
		if !slices.Equal(got, first) {
			t.Fatalf("run %d gave %v, run 0 gave %v: routing depended on I/O timing", run, got, first)
		}
	}
}
