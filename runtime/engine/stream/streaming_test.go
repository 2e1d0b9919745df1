package stream_test

import (
	"fmt"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/load"
)

// Streaming the routed experts changes nothing: tiny-k512 (512 experts,
// top-10) with every expert resident, with an arena holding all of them and
// with one holding 5%, from the HF checkpoint and from a GGUF with its pack,
// gives identical tokens and logits. The 5% arena must evict and re-read.
func TestStreamingIsExact(t *testing.T) {
	ref := e2e.Ref(t, "tiny-k512")
	prompt := ref.Tokens[:12]
	const n = 20
	base, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{AllLogits: true, PrefillRows: 4})
	wantT, wantL := e2e.DecodeAll(t, base, prompt, n)

	all := 4 * 512
	small := all * 5 / 100
	for _, slots := range []int{all, small} {
		l, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{AllLogits: true, PrefillRows: 4, ArenaExperts: slots})
		gotT, gotL := e2e.DecodeAll(t, l, prompt, n)
		e2e.SameRun(t, "HF checkpoint, arena of "+strconv.Itoa(slots), gotT, wantT, gotL, wantL)
		st := l.Model.StreamStats()
		t.Logf("HF, %d slots: %d hits, %d misses, %.1f MB read, stall %v", slots, st.Hits, st.Misses, float64(st.BytesRead)/1e6, st.Stall.Round(time.Millisecond))
		if slots == small && st.Misses <= small {
			t.Errorf("a %d-slot arena missed only %d times: it never evicted", small, st.Misses)
		}
	}

	// The 12-token prompt is three windows: prefilled layer by layer
	// (the default) and window by window, the same logits; layer by layer
	// reads fewer experts.
	var read [2]int64
	for i, wm := range []bool{false, true} {
		l, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{AllLogits: true, PrefillRows: 4, ArenaExperts: small, WindowMajor: wm})
		gotT, gotL := e2e.DecodeAll(t, l, prompt, 0)
		e2e.SameRun(t, "prefill only, window-major "+strconv.FormatBool(wm), gotT, nil, gotL, wantL[:len(prompt)])
		st := l.Model.StreamStats()
		read[i] = st.BytesRead
		t.Logf("prefill, window-major %v: %d hits, %d misses, %d read ahead, %d bytes read", wm, st.Hits, st.Misses, st.Prefetched, st.BytesRead)
	}
	if read[0] >= read[1] {
		t.Errorf("layer-major prefill read %d bytes of experts, window-major %d: expected fewer", read[0], read[1])
	}

	dir := t.TempDir()
	path, _ := e2e.ConvertOracle(t, "tiny-k512", "", dir)
	if err := e2e.PackFile(path); err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 8} {
		l := e2e.GGUF(t, path, load.GGUFOptions{Options: load.Options{AllLogits: true, PrefillRows: 4, ArenaExperts: small,
			Stream: stream.Options{Threads: threads}}})
		gotT, gotL := e2e.DecodeAll(t, l, prompt, n)
		e2e.SameRun(t, "GGUF + pack, 5% arena, "+strconv.Itoa(threads)+" threads", gotT, wantT, gotL, wantL)
		st := l.Model.StreamStats()
		t.Logf("GGUF + pack, %d slots, %d threads: %d hits, %d misses, %.1f MB read", small, threads, st.Hits, st.Misses, float64(st.BytesRead)/1e6)
	}
}

// With MoCE on, routing depends on residency; residency that routing sees
// changes only at deterministic points, so runs with random read delays and
// different thread counts give the same tokens. Read-ahead is on too.
func TestMoCEIsDeterministic(t *testing.T) {
	ref := e2e.Ref(t, "tiny-k512")
	prompt := ref.Tokens[:8]
	const n = 8
	small := 4 * 512 * 5 / 100
	var first []int
	for run, threads := range []int{8, 1, 3, 8, 2} {
		l, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{PrefillRows: 4, ArenaExperts: small, MoCE: true, ReadAhead: true,
			Stream: stream.Options{Threads: threads},
			WrapReader: func(r stream.Reader) stream.Reader {
				return &e2e.Delayed{Inner: r, Rng: rand.New(rand.NewSource(int64(run))), MaxDelay: 3 * time.Millisecond}
			}})
		got, _ := e2e.DecodeAll(t, l, prompt, n)
		st := l.Model.StreamStats()
		t.Logf("run %d, %d threads: %v; %d hits, %d misses, %d read-aheads (%d used)", run, threads, got, st.Hits, st.Misses, st.Prefetched, st.Used)
		if run == 0 {
			first = got
			if st.Prefetched == 0 {
				t.Error("read-ahead never issued a read")
			}
			continue
		}
		if !slices.Equal(got, first) {
			t.Fatalf("run %d (%d threads) gave %v, run 0 gave %v: routing depended on I/O timing", run, threads, got, first)
		}
	}
	plain, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{PrefillRows: 4})
	exact, _ := e2e.DecodeAll(t, plain, prompt, n)
	t.Logf("without MoCE: %v", exact)
}

// A restart with the saved usage history starts with the arena filled from
// it: the same prompt then reads fewer bytes of experts than after a cold
// start (layer-major prefill reads each expert it needs ahead, so the
// prompt's misses are few either way; the history saves the reads). A
// damaged history is ignored with a warning.
func TestUsageHistoryAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	path, _ := e2e.ConvertOracle(t, "tiny-k512", "", dir)
	if err := e2e.PackFile(path); err != nil {
		t.Fatal(err)
	}
	ref := e2e.Ref(t, "tiny-k512")
	prompt := ref.Tokens[:8]
	// run returns the telemetry of the prompt and its tokens, after the load
	// (which fills the arena from the history).
	run := func(warn func(error)) stream.Stats {
		l, err := load.GGUF(path, load.GGUFOptions{Options: e2e.WithGenerator(load.Options{PrefillRows: 4, ArenaExperts: 400, Warn: warn})})
		if err != nil {
			t.Fatal(err)
		}
		loaded := l.Model.StreamStats()
		e2e.DecodeAll(t, l, prompt, 8)
		st := l.Model.StreamStats().Sub(loaded)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return st
	}
	cold := run(nil)
	warm := run(nil)
	t.Logf("cold start: %d hits, %d misses, %d bytes read; with the saved history: %d hits, %d misses, %d bytes read",
		cold.Hits, cold.Misses, cold.BytesRead, warm.Hits, warm.Misses, warm.BytesRead)
	if warm.BytesRead >= cold.BytesRead {
		t.Errorf("the saved history did not help: %d bytes read warm, %d cold", warm.BytesRead, cold.BytesRead)
	}
	hist := path + ".experts.usage"
	if err := os.WriteFile(hist, []byte("not a history"), 0o644); err != nil {
		t.Fatal(err)
	}
	var warned error
	again := run(func(err error) { warned = err })
	if warned == nil || again.Misses != cold.Misses || again.BytesRead != cold.BytesRead {
		t.Errorf("a damaged history: warning %v, %d misses and %d bytes read (cold %d and %d)", warned, again.Misses, again.BytesRead, cold.Misses, cold.BytesRead)
	}
}

// A pack whose expert bytes were altered under their checksums fails with a
// clear error when the expert is read; nothing corrupt is used.
func TestStreamingCorruptPack(t *testing.T) {
	dir := t.TempDir()
	path, _ := e2e.ConvertOracle(t, "tiny-k512", "", dir)
	if err := e2e.PackFile(path); err != nil {
		t.Fatal(err)
	}
	pk := path + ".experts"
	data, err := os.ReadFile(pk)
	if err != nil {
		t.Fatal(err)
	}
	for i := 64 << 10; i < len(data)-(64<<10); i += 4096 { // flip bytes across the entries, not the header or index
		data[i] ^= 0x5a
	}
	if err := os.WriteFile(pk, data, 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := load.GGUF(path, load.GGUFOptions{Options: e2e.WithGenerator(load.Options{PrefillRows: 4, ArenaExperts: 100, History: "-"})})
	if err != nil {
		if strings.Contains(err.Error(), "checksum") || strings.Contains(err.Error(), "stale") {
			return // refused at open: fine too
		}
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.Model.NewSession().Generate(e2e.Ref(t, "tiny-k512").Tokens[:4], 2, engine.GenerateOptions{PrefillRows: 4})
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("a corrupt pack decoded: err = %v", err)
	}
}

// Layer-major prefill (a prompt of several windows, each layer run for
// every window before the next layer) is exact on every oracle: HF's
// greedy tokens and its logits within the oracle's tolerance, and bit for
// bit the resident run's and the window-major run's logits, through an
// arena that holds a quarter of the experts (hybrid GDN and attention
// layers; q4-a's hyper-connection streams, PLE rows and indexer caches).
func TestLayerMajorPrefillIsExact(t *testing.T) {
	for _, o := range e2e.Oracles {
		t.Run(o.Name, func(t *testing.T) {
			if raceEnabled && o.Name == "tiny-k512" {
				t.Skip("race: tiny-k512 is the slowest oracle (the others cover it)")
			}
			const rows, prompt = 5, 16 // four windows, the last one short
			base, ref := e2e.OpenOracle(t, o.Name, load.Options{AllLogits: true, PrefillRows: rows})
			wantT, wantL := e2e.DecodeAll(t, base, ref.Greedy[:prompt], 2)
			var read [2]int64
			for i, wm := range []bool{false, true} {
				c := base.Config.Architecture
				slots := max(c.NumLayers*c.MoE.NumExperts/4, c.MoE.NumExperts+1)
				l, _ := e2e.OpenOracle(t, o.Name, load.Options{AllLogits: true, PrefillRows: rows, ArenaExperts: slots, WindowMajor: wm})
				worst, n := 0.0, 0
				if !raceEnabled {
					worst, n = e2e.CheckGreedyDecode(t, l, ref, prompt, rows, o.Tol)
				}
				gotT, gotL := e2e.DecodeAll(t, l, ref.Greedy[:prompt], 2)
				e2e.SameRun(t, fmt.Sprintf("%d-slot arena, window-major %v", slots, wm), gotT, wantT, gotL, wantL)
				st := l.Model.StreamStats()
				read[i] = st.BytesRead
				t.Logf("window-major %v: %d slots, %d greedy tokens, worst rel L2 %.2g; %d hits, %d misses, %d read ahead, %d bytes read", wm, slots, n, worst, st.Hits, st.Misses, st.Prefetched, st.BytesRead)
			}
			if read[0] > read[1] {
				t.Errorf("layer-major prefill read %d bytes of experts, window-major %d", read[0], read[1])
			}
		})
	}
}

// Layer-major prefill runs a layer's routed experts for the rows of every
// window at once (a routed batch): with quantized experts (q8_0: integer
// dots whose multi-row kernels may round a dot's partial sums in another
// order than the one-row kernel) the streamed prompt's logits stay within
// float32 rounding of the resident run's and the greedy tokens the same
// (the distance to HF's float64 logits, the quantization's, is logged). The
// batch must hold more rows than one window (the point of it), and read
// fewer experts than window-major prefill.
func TestRoutedBatchQuantized(t *testing.T) {
	ref := e2e.Ref(t, "tiny-k512")
	prompt := ref.Greedy[:16]
	path, _ := e2e.ConvertOracle(t, "tiny-k512", "experts=q8_0", t.TempDir())
	if err := e2e.PackFile(path); err != nil {
		t.Fatal(err)
	}
	open := func(slots int, windowMajor bool) *load.Loaded {
		return e2e.GGUF(t, path, load.GGUFOptions{Options: load.Options{AllLogits: true, PrefillRows: 4, ArenaExperts: slots, WindowMajor: windowMajor}})
	}
	wantT, wantL := e2e.DecodeAll(t, open(0, false), prompt, 4)
	small := 4 * 512 * 5 / 100
	var read [2]int64
	for i, wm := range []bool{false, true} {
		l := open(small, wm)
		gotT, gotL := e2e.DecodeAll(t, l, prompt, 4)
		st := l.Model.StreamStats()
		read[i] = st.BytesRead
		worst, hf := 0.0, 0.0
		for r := range gotL {
			worst = max(worst, e2e.RelL2(gotL[r], wantL[r]))
			if r < len(prompt) { // HF's rows of the prompt (its greedy path)
				hf = max(hf, e2e.RelL2(gotL[r], ref.GreedyLogits[r]))
			}
		}
		t.Logf("window-major %v: %d batches of %d rows; worst rel L2 %.2g against the resident run, %.2g against HF; %d bytes read",
			wm, st.Batches, st.BatchRows/max(st.Batches, 1), worst, hf, st.BytesRead)
		if !slices.Equal(gotT, wantT) {
			t.Errorf("window-major %v: tokens %v, the resident run's %v", wm, gotT, wantT)
		}
		if worst > 1e-5 {
			t.Errorf("window-major %v: logits %.2g (rel L2) from the resident run's", wm, worst)
		}
		switch {
		case wm && st.Batches != 0:
			t.Errorf("window-major prefill ran %d routed batches", st.Batches)
		case !wm && st.BatchRows <= 4*st.Batches:
			t.Errorf("layer-major prefill ran %d routed batches of %d rows in all: no more than a window's", st.Batches, st.BatchRows)
		}
	}
	if read[0] >= read[1] {
		t.Errorf("layer-major prefill read %d bytes of experts, window-major %d", read[0], read[1])
	}
}
