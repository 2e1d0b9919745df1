package serve

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
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

// BenchmarkTTFTWhileGenerating is the time to the first token of a
// 16-token request (streamed; from the request to its first token's event)
// on an idle server ("idle"), while a 2,000-token generation streams on
// another session ("busy": --parallel 2, the engine taking turns window by
// window), behind it on a one-session server ("serial": it waits for the
// generation to end), and while another session prefills 2,000-token
// prompts in windows of the model's prefill rows or of 16
// ("busy-prefill", "busy-prefill-rows16": the wait is one of those
// windows). Each request's prompt is new, so none reuses a kept prefix.
// Metrics: ttft-ms, and beside a generation its tokens/s while it shares
// the engine with the requests timed. tiny-go on the cpu
// backend with a context of 4096 (2,000 tokens and the prompt fit);
// STRATA_SERVE_TTFT_MODEL=DIR runs another HF checkpoint (docs/serve.md has
// the numbers):
//
//	go test ./runtime/serve -run NONE -bench TTFTWhileGenerating -benchtime 20x
func BenchmarkTTFTWhileGenerating(b *testing.B) {
	dir := os.Getenv("STRATA_SERVE_TTFT_MODEL")
	if dir == "" {
		dir = "../../models/tiny-go"
	}
	l, err := load.HF(dir, withGenerator(load.Options{Context: 4096}))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	tm, err := text.FromHF(dir)
	if err != nil {
		b.Fatal(err)
	}
	lanes := []*engine.Lane{l.Model.Lane()}
	for len(lanes) < 2 {
		ln, err := l.Model.NewLane()
		if err != nil {
			b.Fatal(err)
		}
		lanes = append(lanes, ln)
	}
	V := l.Config.Architecture.VocabSize
	prompt := func(seed, n int) []int {
		p := make([]int, n)
		for k := range p {
			p[k] = (seed*7919 + k*131 + 17) % V
		}
		return p
	}
	for _, c := range []struct {
		name              string
		parallel          int
		long              bool
		longPrompt, longN int // the other request's prompt and reply lengths
		rows              int // prefill rows (0: the model's)
	}{
		{"idle", 2, false, 0, 0, 0}, {"busy", 2, true, 32, 2000, 0}, {"serial", 1, true, 32, 2000, 0},
		{"busy-prefill", 2, true, 2000, 1, 0}, {"busy-prefill-rows16", 2, true, 2000, 1, 16},
	} {
		b.Run(c.name, func(b *testing.B) {
			opt := Options{Model: "m", Text: tm, Context: l.Model.Context(), Vocab: V, Queue: 4,
				NewSession: func() Session { return EngineSession(l.Model.NewSession()) },
				Generate:   engine.GenerateOptions{PrefillRows: l.PrefillRows, IgnoreEOS: true}}
			if c.rows > 0 {
				opt.Generate.PrefillRows = c.rows
			}
			if c.parallel > 1 {
				opt.Parallel = c.parallel
				opt.NewLaneSession = func(i int) Session { return EngineSession(lanes[i].NewSession()) }
			}
			s, err := New(opt)
			if err != nil {
				b.Fatal(err)
			}
			ts := httptest.NewServer(s.Handler())
			defer func() { ts.Close(); s.Close() }()
			ttft := func(p []int, n int) (time.Duration, *streamBody) {
				start := time.Now()
				body := streamCompletion(b, ts.URL, p, n)
				body.next() // the first token
				return time.Since(start), body
			}
			_, warm := ttft(prompt(999, 16), 1) // untimed: the weights' first touch
			warm.drain()
			var longTokens atomic.Int64
			stop := make(chan struct{})
			longDone := make(chan struct{})
			if c.long {
				started := make(chan struct{})
				go func() {
					defer close(longDone)
					for k := 0; ; k++ {
						_, body := ttft(prompt(1000+k, c.longPrompt), c.longN)
						if k == 0 {
							close(started)
						}
						for body.next() {
							longTokens.Add(1)
							select {
							case <-stop:
								body.close()
								return
							default:
							}
						}
					}
				}()
				<-started
			} else {
				close(longDone)
			}
			var sum time.Duration
			b.ResetTimer()
			begin, tokens0 := time.Now(), longTokens.Load()
			for i := range b.N {
				d, body := ttft(prompt(i, 16), 1)
				body.drain()
				sum += d
			}
			elapsed, tokens := time.Since(begin), longTokens.Load()-tokens0
			b.StopTimer()
			close(stop)
			<-longDone
			b.ReportMetric(float64(sum.Microseconds())/1000/float64(b.N), "ttft-ms")
			if c.long && c.longN > 1 {
				b.ReportMetric(float64(tokens)/elapsed.Seconds(), "long-tok/s")
			}
		})
	}
}

// streamBody reads a streamed completion's events.
type streamBody struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func streamCompletion(b *testing.B, url string, prompt []int, n int) *streamBody {
	resp, err := http.Post(url+"/v1/completions", "application/json",
		strings.NewReader(fmt.Sprintf(`{"prompt":%s,"max_tokens":%d,"stream":true}`, idsJSON(prompt), n)))
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		b.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	return &streamBody{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next reads up to the next event with a choice (a token's text); false
// at the end of the stream.
func (s *streamBody) next() bool {
	for s.sc.Scan() {
		if d, ok := strings.CutPrefix(s.sc.Text(), "data: "); ok && d != "[DONE]" && strings.Contains(d, `"choices":[{`) {
			return true
		}
	}
	s.resp.Body.Close()
	return false
}

func (s *streamBody) drain() {
	for s.next() {
	}
}

func (s *streamBody) close() { s.resp.Body.Close() }
