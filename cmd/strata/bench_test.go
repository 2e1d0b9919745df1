package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/bench"
)

// BenchmarkSynthPack times strata synth and strata pack at a real expert
// count: 2 layers of Qwen3-Next-80B-A3B (512 experts, top-10) with IQ2_XS
// experts (909,312 B each) and a q8_0/q6_k trunk, a 1.6 GB GGUF and a
// 0.94 GB pack. It writes 2.5 GB under the test's temp dir; run it with
//
//	go test -run XXX -bench SynthPack -benchtime 1x ./cmd/strata/
func BenchmarkSynthPack(b *testing.B) {
	out := filepath.Join(b.TempDir(), "synth.gguf")
	var synthT, packT time.Duration
	for b.Loop() {
		start := time.Now()
		if _, stderr, status := runStrataB("synth", "--model", "qwen3-next-80b-a3b", "--layers", "2", "--no-mtp",
			"--quant", "experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k", "-o", out); status != 0 {
			b.Fatalf("synth: %s", stderr)
		}
		synthT += time.Since(start)
		start = time.Now()
		if _, stderr, status := runStrataB("pack", out); status != 0 {
			b.Fatalf("pack: %s", stderr)
		}
		packT += time.Since(start)
	}
	g, err := os.Stat(out)
	if err != nil {
		b.Fatal(err)
	}
	p, err := os.Stat(out + ".experts")
	if err != nil {
		b.Fatal(err)
	}
	n := float64(b.N)
	b.ReportMetric(synthT.Seconds()/n, "synth-s")
	b.ReportMetric(packT.Seconds()/n, "pack-s")
	b.ReportMetric(float64(g.Size())/1e9, "gguf-GB")
	b.ReportMetric(float64(p.Size())/1e9, "pack-GB")
	b.ReportMetric(float64(p.Size())/1e6/(packT.Seconds()/n), "pack-MB/s")
}

func runStrataB(args ...string) (stdout, stderr string, status int) {
	var o, e discardBuffer
	status = run(args, &o, &e)
	return "", e.tail, status
}

// discardBuffer keeps only the last bytes written (the progress bar redraws
// many times; an error message is what matters).
type discardBuffer struct{ tail string }

func (d *discardBuffer) Write(p []byte) (int, error) {
	d.tail += string(p)
	if len(d.tail) > 4096 {
		d.tail = d.tail[len(d.tail)-4096:]
	}
	return len(p), nil
}

// --icb replays on every backend that can, as strata run's does: ICBs on
// metal, CUDA graphs on cuda (bench used to measure cuda without replay).
func TestBenchICBReachesEveryBackend(t *testing.T) {
	f, err := parseBenchFlags([]string{"--icb", "--backend", "cuda"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opt := f.options(bench.Config{Backend: "cuda"}, io.Discard)
	if opt.CUDA.Direct || !opt.Metal.ICB {
		t.Errorf("bench --icb: cuda direct %v, metal ICB %v; want replay on both", opt.CUDA.Direct, opt.Metal.ICB)
	}
}

// cuda replays CUDA graphs unless --icb=false says otherwise; metal's ICBs
// stay opt-in.
func TestCUDAReplaysByDefault(t *testing.T) {
	for _, c := range []struct {
		args       []string
		direct, ic bool
	}{{nil, false, false}, {[]string{"--icb"}, false, true}, {[]string{"--icb=false"}, true, false}} {
		f, err := parseBenchFlags(append(c.args, "--backend", "cuda"), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		opt := f.options(bench.Config{Backend: "cuda"}, io.Discard)
		if opt.CUDA.Direct != c.direct || opt.Metal.ICB != c.ic {
			t.Errorf("bench %v: cuda direct %v, metal ICB %v; want %v, %v", c.args, opt.CUDA.Direct, opt.Metal.ICB, c.direct, c.ic)
		}
	}
}
