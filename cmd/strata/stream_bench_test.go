package main

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-llm/strata"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/stream"
)

// BenchmarkStreaming decodes a synthesized 2-layer Qwen3-Next-80B-A3B (512
// experts, top-10, IQ2_XS experts: a 0.94 GB pack) with the arena at 10% and
// 20% of the experts, and reports per configuration: the hit rate next to
// the LRU simulation and Belady's optimal (MIN) hit rate for the same slots
// on the same access trace, MB/s read, stall ms per token; and with MoCE at
// M = 16, 24, 32 and uncapped: misses per token and the logits' relative L2
// distance from unsubstituted routing. Run with
//
//	go test -run XXX -bench Streaming -benchtime 1x ./cmd/strata/
func BenchmarkStreaming(b *testing.B) {
	out := filepath.Join(b.TempDir(), "synth.gguf")
	if _, stderr, status := runStrataB("synth", "--model", "qwen3-next-80b-a3b", "--layers", "2", "--no-mtp",
		"--quant", "experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k", "-o", out); status != 0 {
		b.Fatalf("synth: %s", stderr)
	}
	if _, stderr, status := runStrataB("pack", out); status != 0 {
		b.Fatalf("pack: %s", stderr)
	}
	prompt := []int{11, 22, 33, 44, 55, 66, 77, 88}
	const n = 24
	type result struct {
		tokens int
		logits [][]float32
		st     stream.Stats
		trace  []int
		wall   time.Duration
	}
	decode := func(opt strata.HFOptions) result {
		opt.PrefillRows, opt.AllLogits, opt.History = 4, true, "-"
		opt.Stream.Trace = true
		l, err := strata.OpenGGUF(out, strata.GGUFOptions{HFOptions: opt})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		var r result
		start := time.Now()
		got, err := l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: 4,
			OnLogits: func(row []float32) error { r.logits = append(r.logits, row); return nil }})
		if err != nil {
			b.Fatal(err)
		}
		r.wall, r.tokens, r.st, r.trace = time.Since(start), len(prompt)+len(got), l.Model.StreamStats(), l.Model.StreamTrace()
		return r
	}
	const all = 2 * 512
	for b.Loop() {
		var exact result
		for _, pct := range []int{10, 20} {
			slots := all * pct / 100
			r := decode(strata.HFOptions{ArenaExperts: slots})
			if pct == 10 {
				exact = r
			}
			hit := float64(r.st.Hits+r.st.Late) / float64(len(r.trace))
			lru := float64(stream.LRUHits(r.trace, slots)) / float64(len(r.trace))
			min := float64(stream.BeladyHits(r.trace, slots)) / float64(len(r.trace))
			fmt.Printf("arena %d%% (%d experts): hit rate %.3f (LRU simulation %.3f, Belady MIN %.3f), %.0f MB read at %.0f MB/s, stall %.1f ms/token, %.2f tok/s\n",
				pct, slots, hit, lru, min, float64(r.st.BytesRead)/1e6, float64(r.st.BytesRead)/1e6/r.st.Stall.Seconds(),
				float64(r.st.Stall.Milliseconds())/float64(r.tokens), float64(r.tokens)/r.wall.Seconds())
		}
		for _, m := range []int{16, 24, 32, -1} {
			r := decode(strata.HFOptions{ArenaExperts: all * 10 / 100, MoCE: true, MoCEMaxRank: m})
			var worst float64
			for i := range exact.logits {
				worst = math.Max(worst, relL2(r.logits[i], exact.logits[i]))
			}
			fmt.Printf("MoCE M=%d (-1: uncapped): %.1f misses/token (unsubstituted %.1f), logits relative L2 to unsubstituted routing: worst %.3g\n",
				m, float64(r.st.Misses)/float64(r.tokens), float64(exact.st.Misses)/float64(exact.tokens), worst)
		}
	}
}

func relL2(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		e := float64(a[i]) - float64(b[i])
		d, n = d+e*e, n+float64(b[i])*float64(b[i])
	}
	return math.Sqrt(d / n)
}
