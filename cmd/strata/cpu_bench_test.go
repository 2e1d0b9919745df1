package main

import (
	"os"
	"testing"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// BenchmarkCPU is strata bench's path (benchOnce) as a go benchmark, for
// `go test -bench CPU -cpuprofile`: prefill of 64 tokens, then 32 decoded,
// on the cpu backend, from the GGUF named by STRATA_BENCH_GGUF (a model of
// real size, e.g. strata synth --model qwen3-next-80b-a3b --layers 2; the
// default model is too small to say anything about the kernels).
func BenchmarkCPU(b *testing.B) {
	path := os.Getenv("STRATA_BENCH_GGUF")
	if path == "" {
		b.Skip("set STRATA_BENCH_GGUF to a GGUF file")
	}
	l, err := openModel("", path, load.Options{Backend: load.BackendCPU, History: "-"})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	prompt, err := benchPrompt("", 64, 1, l.Config.Architecture.VocabSize)
	if err != nil {
		b.Fatal(err)
	}
	r := &benchRun{l: l, sp: engine.SpecOptions{}}
	var pp, tg float64
	for b.Loop() {
		p, t, err := benchOnce(r, prompt, 32)
		if err != nil {
			b.Fatal(err)
		}
		pp, tg = pp+p, tg+t
	}
	b.ReportMetric(pp/float64(b.N), "pp_tok/s")
	b.ReportMetric(tg/float64(b.N), "tg_tok/s")
}
