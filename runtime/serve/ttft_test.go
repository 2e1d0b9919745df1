package serve

import (
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/text"
)

// TestTenTurnReuse drives a 10-turn conversation (each turn's prompt is the
// last one, its reply and a new user message) through a server with prefix
// reuse and one without: every turn's reply is the same, the reusing server
// prefills only the new tokens, and the log has each turn's time to first
// token side by side (max_tokens 1: the request's time is the prefill and
// the first token; one warm-up request first). STRATA_SERVE_TTFT_MODEL=DIR runs it on another HF
// checkpoint with a tokenizer (docs/serve.md has the numbers).
func TestTenTurnReuse(t *testing.T) {
	var l *load.Loaded
	var tm *text.Model
	repeat := 2 // a byte per token here
	name := "tiny-a with a byte-level tokenizer"
	if dir := os.Getenv("STRATA_SERVE_TTFT_MODEL"); dir != "" {
		var err error
		if l, err = load.HF(dir, withGenerator(load.Options{Context: 4096})); err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if tm, err = text.FromHF(dir); err != nil {
			t.Fatal(err)
		}
		repeat, name = 8, dir
	} else {
		m := loadReal(t)
		m.mu.Lock()
		defer m.mu.Unlock()
		l, tm = m.l, m.tm
	}
	const turns = 10
	user := func(k int) []int {
		return tm.Tok.Encode(fmt.Sprintf("\nTurn %d: %s", k, strings.Repeat("tell me more about the engine. ", repeat)))
	}
	type turn struct {
		prompt, cached int
		ttft           time.Duration
		text           string
	}
	run := func(noReuse bool) []turn {
		s, err := New(Options{Model: "m", Text: tm, Context: l.Config.Runtime.ContextLength, Vocab: l.Config.Architecture.VocabSize,
			NewSession: func() Session { return l.Model.NewSession() }, NoReuse: noReuse,
			Generate: engine.GenerateOptions{PrefillRows: l.PrefillRows, IgnoreEOS: true}, Queue: 1})
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(s.Handler())
		defer func() { ts.Close(); s.Close() }()
		// A warm-up request, not timed: the first run must not pay for the
		// weights' first touch alone.
		if code, b, _ := post(t, ts.URL+"/v1/completions", `{"prompt":"warm up","max_tokens":2}`); code != 200 {
			t.Fatalf("warm-up: %d %s", code, b)
		}
		var prompt []int
		var out []turn
		for k := 1; k <= turns; k++ {
			prompt = append(prompt, user(k)...)
			start := time.Now()
			code, b, _ := post(t, ts.URL+"/v1/completions", `{"prompt":`+idsJSON(prompt)+`,"max_tokens":1}`)
			d := time.Since(start)
			if code != 200 {
				t.Fatalf("turn %d: %d %s", k, code, b)
			}
			r := decode[textReply](t, b)
			out = append(out, turn{prompt: len(prompt), cached: r.Usage.PromptTokensDetails.CachedTokens, ttft: d, text: r.Choices[0].Text})
			// With one token made, the session holds exactly the prompt (the
			// last token is fed with the next prompt), so the next turn, the
			// prompt and a new message, extends it.
		}
		return out
	}
	with, without := run(false), run(true)
	var tab strings.Builder
	fmt.Fprintf(&tab, "| turn | prompt tokens | prefilled with reuse | TTFT with reuse | TTFT without | ratio |\n|---:|---:|---:|---:|---:|---:|\n")
	var sumW, sumN time.Duration
	for k := range turns {
		w, n := with[k], without[k]
		wantCached := 0
		if k > 0 {
			wantCached = with[k-1].prompt
		}
		if w.text != n.text || w.prompt != n.prompt || w.cached != wantCached || n.cached != 0 {
			t.Errorf("turn %d: with reuse %+v, without %+v; want %d cached with reuse and the same reply", k+1, w, n, wantCached)
		}
		sumW += w.ttft
		sumN += n.ttft
		fmt.Fprintf(&tab, "| %d | %d | %d | %v | %v | %.2f× |\n", k+1, w.prompt, w.prompt-w.cached,
			w.ttft.Round(10*time.Microsecond), n.ttft.Round(10*time.Microsecond), float64(n.ttft)/float64(w.ttft))
	}
	fmt.Fprintf(&tab, "| all | | | %v | %v | %.2f× |\n", sumW.Round(10*time.Microsecond), sumN.Round(10*time.Microsecond), float64(sumN)/float64(sumW))
	t.Logf("%s, %s backend:\n%s", name, load.BackendCPU, tab.String())
}
