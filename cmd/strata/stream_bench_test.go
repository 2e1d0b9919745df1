package main

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
	"github.com/strata-llm/strata/runtime/load"
)

// BenchmarkStreaming decodes a synthesized 2-layer Qwen3-Next-80B-A3B (512
// experts, top-10, IQ2_XS experts: a 0.94 GB pack) with the arena at 10% and
// 20% of the experts, and reports per configuration: the hit rate next to
// the LRU simulation and Belady's optimal (MIN) hit rate for the same slots
// on the same access trace; the streamer's read rate (bytes over the time
// its threads spent reading, per thread and for the pool) next to the raw
// sequential read rate of the pack at the same request size (one entry per
// read, through the same page-cache bypass); stall ms per token; and with
// MoCE at M = 16, 24, 32 and uncapped: misses per token and the logits'
// relative L2 distance from unsubstituted routing. Run with
//
//	go test -run XXX -bench '^BenchmarkStreaming$' -benchtime 1x ./cmd/strata/
func BenchmarkStreaming(b *testing.B) {
	out := filepath.Join(b.TempDir(), "synth.gguf")
	if _, stderr, status := runStrataB("synth", "--model", "qwen3-next-80b-a3b", "--layers", "2", "--no-mtp",
		"--quant", "experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k", "-o", out); status != 0 {
		b.Fatalf("synth: %s", stderr)
	}
	if _, stderr, status := runStrataB("pack", out); status != 0 {
		b.Fatalf("pack: %s", stderr)
	}
	raw, rawPath := rawSequentialRead(b, out)
	fmt.Printf("pack %s: raw sequential read, one %.0f KiB entry per read, one thread: %.0f MB/s (%s)\n",
		pack.Path(out), raw.entryKiB, raw.mbps, rawPath)
	prompt := []int{11, 22, 33, 44, 55, 66, 77, 88}
	const n = 24
	type result struct {
		tokens int
		logits [][]float32
		st     stream.Stats
		trace  []int
		wall   time.Duration
		io     string
	}
	decode := func(opt load.Options) result {
		opt.PrefillRows, opt.AllLogits, opt.History, opt.Generate = 4, true, "-", generate
		opt.Stream.Trace = true
		var packIO interface{ IOPath() string }
		opt.WrapReader = func(r stream.Reader) stream.Reader {
			packIO, _ = r.(interface{ IOPath() string })
			return r
		}
		l, err := load.GGUF(out, load.GGUFOptions{Options: opt})
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
		r.io = "no pack reader"
		if packIO != nil {
			r.io = packIO.IOPath()
		}
		return r
	}
	const all = 2 * 512
	for b.Loop() {
		var exact result
		for _, pct := range []int{10, 20} {
			slots := all * pct / 100
			r := decode(load.Options{ArenaExperts: slots})
			if pct == 10 {
				exact = r
			}
			hit := float64(r.st.Hits+r.st.Late) / float64(len(r.trace))
			lru := float64(stream.LRUHits(r.trace, slots)) / float64(len(r.trace))
			min := float64(stream.BeladyHits(r.trace, slots)) / float64(len(r.trace))
			mb := float64(r.st.BytesRead) / 1e6
			// No policy beats the compulsory misses: each distinct expert's first use.
			distinct := map[int]bool{}
			for _, k := range r.trace {
				distinct[k] = true
			}
			bound := 1 - float64(len(distinct))/float64(len(r.trace))
			fmt.Printf("arena %d%% (%d experts): hit rate %.3f (LRU simulation %.3f, Belady MIN %.3f, compulsory-miss bound %.3f over %d accesses); %.0f MB read (%s) at %.0f MB/s per thread, %.0f MB/s for the pool while reading (raw sequential %.0f MB/s); stall %.1f ms/token; %.2f tok/s\n",
				pct, slots, hit, lru, min, bound, len(r.trace), mb, r.io, mb/r.st.ReadTime.Seconds(), mb/r.st.ReadBusy.Seconds(), raw.mbps,
				float64(r.st.Stall.Microseconds())/1e3/float64(r.tokens), float64(r.tokens)/r.wall.Seconds())
		}
		for _, m := range []int{16, 24, 32, -1} {
			r := decode(load.Options{ArenaExperts: all * 10 / 100, MoCE: true, MoCEMaxRank: m})
			var worst float64
			for i := range exact.logits {
				worst = math.Max(worst, relL2(r.logits[i], exact.logits[i]))
			}
			fmt.Printf("MoCE M=%d (-1: uncapped): %.1f misses/token (unsubstituted %.1f), logits relative L2 to unsubstituted routing: worst %.3g\n",
				m, float64(r.st.Misses)/float64(r.tokens), float64(exact.st.Misses)/float64(exact.tokens), worst)
		}
	}
}

type rawRead struct{ entryKiB, mbps float64 }

// rawSequentialRead reads every entry of the pack beside ggufPath in file
// order, one entry per read into page-aligned memory, through the pack
// reader's page-cache bypass: the device's sequential rate at the streamer's
// request size. Buffered (no bypass), it measures the page cache and says so.
func rawSequentialRead(b *testing.B, ggufPath string) (rawRead, string) {
	g, err := gguf.Open(ggufPath)
	if err != nil {
		b.Fatal(err)
	}
	defer g.Close()
	p, err := pack.Open(pack.Path(ggufPath), g)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	buf := backend.AlignedBytes(int64(p.SlotBytes()), pack.PageSize)
	var n int64
	start := time.Now()
	for _, block := range p.Blocks() {
		for e := 0; e < p.Experts(); e++ {
			en, err := p.Entry(block, e)
			if err != nil {
				b.Fatal(err)
			}
			size := (en.Length + pack.PageSize - 1) / pack.PageSize * pack.PageSize
			if err := p.ReadExpert(block, e, 0, buf[:size]); err != nil {
				b.Fatal(err)
			}
			n += int64(size)
		}
	}
	el := time.Since(start)
	path := p.IOPath()
	if !p.Direct() {
		path += "; the page cache, not the device"
	}
	return rawRead{entryKiB: float64(p.SlotBytes()) / 1024, mbps: float64(n) / 1e6 / el.Seconds()}, path
}

func relL2(a, b []float32) float64 {
	var d, n float64
	for i := range b {
		e := float64(a[i]) - float64(b[i])
		d, n = d+e*e, n+float64(b[i])*float64(b[i])
	}
	return math.Sqrt(d / n)
}
