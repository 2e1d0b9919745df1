package serve

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/strata-llm/strata/runtime/engine"
)

// withLanes serves opt on n lanes of the real model's engine (each its own
// sequence state).
func withLanes(t *testing.T, m *realModel, n int) func(*Options) {
	lanes := make([]*engine.Lane, n)
	for i := range lanes {
		var err error
		if lanes[i], err = m.l.Model.NewLane(); err != nil {
			t.Fatal(err)
		}
	}
	return func(o *Options) {
		o.Parallel = n
		o.NewLaneSession = func(i int) Session { return EngineSession(lanes[i].NewSession()) }
	}
}

// greedyAlone is the engine's reply to prompt made alone on a fresh session.
func (m *realModel) greedyAlone(t *testing.T, prompt []int, n int, g engine.GenerateOptions) []int {
	t.Helper()
	g.PrefillRows = m.l.PrefillRows
	out, err := m.l.Model.NewSession().Generate(prompt, n, g)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParallelInterleaves: with --parallel 2, a short request sent while a
// long generation streams gets its reply before the long one ends (on one
// lane it would wait for all of it), and each reply is the engine's own,
// made alone, with speculation off and on.
func TestParallelInterleaves(t *testing.T) {
	for _, sp := range []engine.SpecOptions{{}, {Depth: 2, SuffixDraft: 3}} {
		t.Run(fmt.Sprintf("spec depth %d", sp.Depth), func(t *testing.T) {
			m := loadReal(t)
			long := m.tm.Encode("Once upon a time there was an engine that ran many sequences.")
			short := m.tm.Encode("hi there, engine")
			const longN, shortN = 600, 4
			g := engine.GenerateOptions{IgnoreEOS: true, Spec: sp}
			m.mu.Lock()
			wantLong, wantShort := m.greedyAlone(t, long, longN, g), m.greedyAlone(t, short, shortN, g)
			m.mu.Unlock()
			ts, _ := startReal(t, func(o *Options) {
				withLanes(t, m, 2)(o)
				o.Generate.IgnoreEOS, o.Generate.Spec = true, sp
			})
			resp, err := http.Post(ts.URL+"/v1/completions", "application/json",
				strings.NewReader(`{"prompt":`+idsJSON(long)+`,"max_tokens":`+fmt.Sprint(longN)+`,"stream":true}`))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var longText strings.Builder
			var streamed atomic.Int32
			longDone := make(chan struct{})
			first := make(chan struct{})
			go func() {
				defer close(longDone)
				sc := bufio.NewScanner(resp.Body)
				for sc.Scan() {
					d, ok := strings.CutPrefix(sc.Text(), "data: ")
					if !ok || d == "[DONE]" {
						continue
					}
					r := decode[textReply](t, []byte(d))
					if len(r.Choices) > 0 {
						longText.WriteString(r.Choices[0].Text)
						if streamed.Add(1) == 1 {
							close(first)
						}
					}
				}
			}()
			<-first
			code, b, _ := post(t, ts.URL+"/v1/completions", `{"prompt":`+idsJSON(short)+`,"max_tokens":`+fmt.Sprint(shortN)+`}`)
			at := streamed.Load()
			if code != 200 {
				t.Fatalf("short request: %d %s", code, b)
			}
			select {
			case <-longDone:
				t.Fatalf("the short request's reply came after the long generation ended (%d events streamed)", at)
			default:
			}
			if r := decode[textReply](t, b); r.Choices[0].Text != m.visible(wantShort) {
				t.Errorf("short reply %q, alone %q", r.Choices[0].Text, m.visible(wantShort))
			}
			<-longDone
			if longText.String() != m.visible(wantLong) {
				t.Errorf("long reply %q, alone %q", longText.String(), m.visible(wantLong))
			}
			t.Logf("the short reply came after %d of the long one's %d stream events", at, streamed.Load())
		})
	}
}

// TestParallelLanesKeepConversations: two conversations whose turns come in
// any order each come back to their own lane and prefill only their new
// tokens, the replies being a fresh session's; /metrics counts the
// requests of each session.
func TestParallelLanesKeepConversations(t *testing.T) {
	m := loadReal(t)
	ts, _ := startReal(t, withLanes(t, m, 2))
	prompts := map[string][]int{"a": m.tm.Encode("conversation a"), "b": m.tm.Encode("a different one, b")}
	kept := map[string]int{}
	for k, c := range []string{"a", "b", "b", "a", "a", "b"} {
		p := prompts[c]
		code, b, _ := post(t, ts.URL+"/v1/completions", `{"prompt":`+idsJSON(p)+`,"max_tokens":3}`)
		if code != 200 {
			t.Fatalf("turn %d: %d %s", k, code, b)
		}
		r := decode[textReply](t, b)
		if got := r.Usage.PromptTokensDetails.CachedTokens; got != kept[c] {
			t.Errorf("turn %d (%s): %d tokens cached, want %d (its lane's kept tokens)", k, c, got, kept[c])
		}
		out := m.greedyAlone(t, p, 3, engine.GenerateOptions{EOS: m.tm.StopIDs()}) // the server is idle: no window runs at once
		if r.Choices[0].Text != m.visible(out) {
			t.Errorf("turn %d (%s): reply %q, a fresh session's %q", k, c, r.Choices[0].Text, m.visible(out))
		}
		// The lane keeps the prompt and the reply but its last token.
		kept[c] = len(p) + len(out) - 1
		prompts[c] = append(append(slices.Clone(p), out...), m.tm.Encode(fmt.Sprintf(" turn %d", k))...)
	}
	_, metrics := get(t, ts.URL+"/metrics")
	for _, want := range []string{`strata_session_requests_total{session="0"} 3`, `strata_session_requests_total{session="1"} 3`,
		`strata_session_busy{session="1"} 0`, "strata_busy 0"} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics has no %q:\n%s", want, metrics)
		}
	}
}

// TestParallelQueueFull: with --parallel 2 and --queue 1, two requests run,
// one waits, the next gets 503; all three then complete, and /metrics shows
// both sessions busy while they run.
func TestParallelQueueFull(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	f := startFake(t, "ok", 0, func(p []int) {
		started.Add(1)
		<-release
	}, func(o *Options) {
		o.Queue, o.Parallel = 1, 2
		sess := o.NewSession
		o.NewLaneSession = func(int) Session { return sess() }
	})
	results := make(chan int, 3)
	send := func(i int) {
		code, _, _ := post(t, f.ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt":"request %d","max_tokens":4}`, i))
		results <- code
	}
	go send(0)
	go send(1)
	waitFor(t, func() bool {
		_, b := get(t, f.ts.URL+"/metrics")
		return strings.Contains(b, `strata_session_busy{session="0"} 1`) && strings.Contains(b, `strata_session_busy{session="1"} 1`)
	})
	go send(2)
	waitFor(t, func() bool { _, b := get(t, f.ts.URL+"/metrics"); return strings.Contains(b, "strata_queue_depth 1\n") })
	code, b, h := post(t, f.ts.URL+"/v1/completions", `{"prompt":"one too many"}`)
	if code != 503 || h.Get("Retry-After") == "" || !strings.Contains(string(b), "queue_full") {
		t.Errorf("beyond the queue: %d, Retry-After %q: %s", code, h.Get("Retry-After"), b)
	}
	close(release)
	for range 3 {
		if c := <-results; c != 200 {
			t.Errorf("a request got %d", c)
		}
	}
}
