package strata

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/stream"
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
	base, _ := openOracle(t, "tiny-k512", HFOptions{AllLogits: true, PrefillRows: 4})
	wantT, wantL := decodeAll(t, base, prompt, n)

	all := 4 * 512
	small := all * 5 / 100
	for _, slots := range []int{all, small} {
		l, _ := openOracle(t, "tiny-k512", HFOptions{AllLogits: true, PrefillRows: 4, ArenaExperts: slots})
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
		l := openGGUF(t, path, GGUFOptions{HFOptions: HFOptions{AllLogits: true, PrefillRows: 4, ArenaExperts: small,
			Stream: stream.Options{Threads: threads}}})
		gotT, gotL := decodeAll(t, l, prompt, n)
		sameRun(t, "GGUF + pack, 5% arena, "+itoa(threads)+" threads", gotT, wantT, gotL, wantL)
		st := l.Model.StreamStats()
		t.Logf("GGUF + pack, %d slots, %d threads: %d hits, %d misses, %.1f MB read", small, threads, st.Hits, st.Misses, float64(st.BytesRead)/1e6)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
