package load

import (
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/stream"
)

// decodeAll runs the tiny-k512 reference prompt and returns tokens and every
// fed row's logits.
func decodeAll(t *testing.T, l *Loaded, prompt []int, n int) ([]int, [][]float32) {
	t.Helper()
	var logits [][]float32
	out, err := l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: l.PrefillRows,
		OnLogits: func(r []float32) error { logits = append(logits, r); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return out, logits
}

// sameRun asserts two runs gave identical tokens and logits, bit for bit.
func sameRun(t *testing.T, what string, gotT, wantT []int, gotL, wantL [][]float32) {
	t.Helper()
	if !slices.Equal(gotT, wantT) {
		t.Fatalf("%s: tokens %v, want %v", what, gotT, wantT)
	}
	for i := range wantL {
		if !slices.Equal(gotL[i], wantL[i]) {
			t.Fatalf("%s: row %d logits differ", what, i)
		}
	}
}

// Streaming the routed experts changes nothing: tiny-k512 (512 experts,
// top-10) with every expert resident, with an arena holding all of them and
// with one holding 5%, from the HF checkpoint and from a GGUF with its pack,
// gives identical tokens and logits. The 5% arena must evict and re-read.
func TestStreamingIsExact(t *testing.T) {
	ref := ref0(t, "tiny-k512")
	prompt := ref.tokens[:12]
	const n = 20
	base, _ := openOracle(t, "tiny-k512", Options{AllLogits: true, PrefillRows: 4})
	wantT, wantL := decodeAll(t, base, prompt, n)

	all := 4 * 512
	small := all * 5 / 100
	for _, slots := range []int{all, small} {
		l, _ := openOracle(t, "tiny-k512", Options{AllLogits: true, PrefillRows: 4, ArenaExperts: slots})
		gotT, gotL := decodeAll(t, l, prompt, n)
		sameRun(t, "HF checkpoint, arena of "+itoa(slots), gotT, wantT, gotL, wantL)
		st := l.Model.StreamStats()
		t.Logf("HF, %d slots: %d hits, %d misses, %.1f MB read, stall %v", slots, st.Hits, st.Misses, float64(st.BytesRead)/1e6, st.Stall.Round(time.Millisecond))
		if slots == small && st.Misses <= small {
			t.Errorf("a %d-slot arena missed only %d times: it never evicted", small, st.Misses)
		}
	}

	dir := t.TempDir()
	path, _ := convertOracle(t, "tiny-k512", "", dir)
	if err := packFile(path); err != nil {
		t.Fatal(err)
	}
	for _, threads := range []int{1, 8} {
		l := openGGUF(t, path, GGUFOptions{Options: Options{AllLogits: true, PrefillRows: 4, ArenaExperts: small,
			Stream: stream.Options{Threads: threads}}})
		gotT, gotL := decodeAll(t, l, prompt, n)
		sameRun(t, "GGUF + pack, 5% arena, "+itoa(threads)+" threads", gotT, wantT, gotL, wantL)
		st := l.Model.StreamStats()
		t.Logf("GGUF + pack, %d slots, %d threads: %d hits, %d misses, %.1f MB read", small, threads, st.Hits, st.Misses, float64(st.BytesRead)/1e6)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// delayed delays every read by a pseudo-random 0–maxDelay.
type delayed struct {
	inner    stream.Reader
	mu       sync.Mutex
	rng      *rand.Rand
	maxDelay time.Duration
}

func (d *delayed) ReadExpert(layer, expert, off int, dst []byte) error {
	d.mu.Lock()
	wait := time.Duration(d.rng.Int63n(int64(d.maxDelay) + 1))
	d.mu.Unlock()
	time.Sleep(wait)
	return d.inner.ReadExpert(layer, expert, off, dst)
}

// With MoCE on, routing depends on residency; residency that routing sees
// changes only at deterministic points, so runs with random read delays and
// different thread counts give the same tokens. Read-ahead is on too.
func TestMoCEIsDeterministic(t *testing.T) {
	ref := ref0(t, "tiny-k512")
	prompt := ref.tokens[:8]
	const n = 8
	small := 4 * 512 * 5 / 100
	var first []int
	for run, threads := range []int{8, 1, 3, 8, 2} {
		l, _ := openOracle(t, "tiny-k512", Options{PrefillRows: 4, ArenaExperts: small, MoCE: true, ReadAhead: true,
			Stream: stream.Options{Threads: threads},
			WrapReader: func(r stream.Reader) stream.Reader {
				return &delayed{inner: r, rng: rand.New(rand.NewSource(int64(run))), maxDelay: 3 * time.Millisecond}
			}})
		got, _ := decodeAll(t, l, prompt, n)
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
	plain, _ := openOracle(t, "tiny-k512", Options{PrefillRows: 4})
	exact, _ := decodeAll(t, plain, prompt, n)
	t.Logf("without MoCE: %v", exact)
}

// A restart with the saved usage history starts with the arena filled from
// it: more hits than a cold start on the same prompt. A damaged history is
// ignored with a warning.
func TestUsageHistoryAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	path, _ := convertOracle(t, "tiny-k512", "", dir)
	if err := packFile(path); err != nil {
		t.Fatal(err)
	}
	ref := ref0(t, "tiny-k512")
	prompt := ref.tokens[:8]
	run := func(warn func(error)) stream.Stats {
		l, err := GGUF(path, GGUFOptions{Options: Options{PrefillRows: 4, ArenaExperts: 400, Warn: warn}})
		if err != nil {
			t.Fatal(err)
		}
		decodeAll(t, l, prompt, 8)
		st := l.Model.StreamStats()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		return st
	}
	cold := run(nil)
	warm := run(nil)
	t.Logf("cold start: %d hits, %d misses; with the saved history: %d hits, %d misses", cold.Hits, cold.Misses, warm.Hits, warm.Misses)
	if warm.Misses >= cold.Misses {
		t.Errorf("the saved history did not help: %d misses warm, %d cold", warm.Misses, cold.Misses)
	}
	hist := path + ".experts.usage"
	if err := os.WriteFile(hist, []byte("not a history"), 0o644); err != nil {
		t.Fatal(err)
	}
	var warned error
	again := run(func(err error) { warned = err })
	if warned == nil || again.Misses != cold.Misses {
		t.Errorf("a damaged history: warning %v, %d misses (cold %d)", warned, again.Misses, cold.Misses)
	}
}

// A pack whose expert bytes were altered under their checksums fails with a
// clear error when the expert is read; nothing corrupt is used.
func TestStreamingCorruptPack(t *testing.T) {
	dir := t.TempDir()
	path, _ := convertOracle(t, "tiny-k512", "", dir)
	if err := packFile(path); err != nil {
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
	l, err := GGUF(path, GGUFOptions{Options: Options{PrefillRows: 4, ArenaExperts: 100, History: "-"}})
	if err != nil {
		if strings.Contains(err.Error(), "checksum") || strings.Contains(err.Error(), "stale") {
			return // refused at open: fine too
		}
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.Model.NewSession().Generate(ref0(t, "tiny-k512").tokens[:4], 2, engine.GenerateOptions{PrefillRows: 4})
	if err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("a corrupt pack decoded: err = %v", err)
	}
}
