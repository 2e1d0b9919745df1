package bench

import (
	"errors"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

func openDefault(Config) (*load.Loaded, error) {
	return load.Default(load.Options{Backend: load.BackendCPU, History: "-"})
}

// TestMeasure: every run of the default model keeps one pp and one tg
// sample per measured repetition (none of the warm-up's), the profile spans
// the measured ones, and an auto configuration gets a spec gate of its own.
func TestMeasure(t *testing.T) {
	configs := []Config{{Backend: load.BackendCPU}, {Backend: load.BackendCPU, Spec: engine.Auto}}
	runs, err := Open(configs, 3, openDefault)
	if err != nil {
		t.Fatal(err)
	}
	defer Close(runs)
	if runs[0].spec.Gate != nil || runs[1].spec.Gate == nil || runs[1].spec.SuffixDraft != 3 {
		t.Fatalf("spec options %+v, %+v: want a gate for auto only, 3 suffix drafts", runs[0].spec, runs[1].spec)
	}
	profiled := 0
	prompt := RandomPrompt(8, 1, runs[0].Loaded.Config.Architecture.VocabSize)
	err = Measure(runs, Options{Prompt: prompt, Gen: 4, Warmup: 1, Reps: 2, Profile: func() (func() error, error) {
		if len(runs[0].PP)+len(runs[1].PP) != 0 {
			t.Error("the profile started after a measured repetition")
		}
		profiled++
		return func() error { profiled++; return nil }, nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	if profiled != 2 {
		t.Errorf("the profile was started and stopped %d times in all, want 1 + 1", profiled)
	}
	for _, r := range runs {
		pp, tg := r.Speeds()
		if len(r.PP) != 2 || len(r.TG) != 2 || !(pp.Mean > 0) || !(tg.Mean > 0) {
			t.Errorf("%s: pp %v, tg %v; want 2 positive samples each", r.Config, r.PP, r.TG)
		}
	}
	err = Measure(runs[:1], Options{Prompt: []int{1 << 30}, Gen: 1, Reps: 1})
	if err == nil || !strings.HasPrefix(err.Error(), "configuration backend=cpu spec=0 arena=0: ") {
		t.Errorf("a token past the vocabulary: %v; want an error naming the configuration", err)
	}
}

func TestOpenNamesConfiguration(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	_, err := Open([]Config{{Backend: "cpu"}, {Backend: "metal", Spec: engine.Auto, Arena: 40}}, 0, func(c Config) (*load.Loaded, error) {
		if calls++; calls == 1 {
			return openDefault(c)
		}
		return nil, boom
	})
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "configuration backend=metal spec=auto arena=40: boom") {
		t.Errorf("%v", err)
	}
}

// RandomPrompt is splitmix64 from the seed: its outputs for seed 1 begin
// 0x910a2dec89025cc1, 0xbeeb8da1658eec67, 0xf893a2eefb32555e,
// 0x71c18690ee42c90b (mod 8192 below).
func TestRandomPrompt(t *testing.T) {
	if got := RandomPrompt(4, 1, 8192); !slices.Equal(got, []int{7361, 3175, 5470, 2315}) {
		t.Errorf("RandomPrompt(4, 1, 8192) = %v", got)
	}
	for _, v := range RandomPrompt(1000, 7, 10) {
		if v < 0 || v >= 10 {
			t.Fatalf("id %d outside a vocabulary of 10", v)
		}
	}
}

func TestMeanSD(t *testing.T) {
	if m, sd := MeanSD([]float64{1, 2, 3, 6}); m != 3 || math.Abs(sd-math.Sqrt(14.0/3)) > 1e-12 {
		t.Errorf("MeanSD(1 2 3 6) = %v ± %v, want 3 ± sqrt(14/3)", m, sd)
	}
	if m, sd := MeanSD([]float64{5}); m != 5 || sd != 0 {
		t.Errorf("one sample: %v ± %v", m, sd)
	}
}

// BenchmarkCPU is strata bench's path (Run.Once) as a go benchmark, for
// `go test -bench CPU -cpuprofile`: prefill of 64 tokens, then 32 decoded,
// on the cpu backend, from the GGUF named by STRATA_BENCH_GGUF (a model of
// real size, e.g. strata synth --model qwen3-next-80b-a3b --layers 2; the
// default model is too small to say anything about the kernels).
func BenchmarkCPU(b *testing.B) {
	path := os.Getenv("STRATA_BENCH_GGUF")
	if path == "" {
		b.Skip("set STRATA_BENCH_GGUF to a GGUF file")
	}
	l, err := load.GGUF(path, load.GGUFOptions{Options: load.Options{Backend: load.BackendCPU, History: "-"}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	r := &Run{Loaded: l}
	prompt := RandomPrompt(64, 1, l.Config.Architecture.VocabSize)
	var pp, tg float64
	for b.Loop() {
		p, t, err := r.Once(prompt, 32)
		if err != nil {
			b.Fatal(err)
		}
		pp, tg = pp+p, tg+t
	}
	b.ReportMetric(pp/float64(b.N), "pp_tok/s")
	b.ReportMetric(tg/float64(b.N), "tg_tok/s")
}
