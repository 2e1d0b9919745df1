package serve

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/sample"
)

// TestChoicesPrefillOnce: "n": 3 answers three choices, indexed, with
// usage summing their tokens; the prompt is prefilled once (all but its
// last token, then a mark), and each choice feeds only that last token.
func TestChoicesPrefillOnce(t *testing.T) {
	f := startFake(t, "hi", 0, nil, nil)
	prompt := loadReal(t).tm.Encode("a prompt")
	code, b, _ := post(t, f.ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt":%s,"n":3,"max_tokens":5}`, idsJSON(prompt)))
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	r := decode[lpTextReply](t, b)
	if len(r.Choices) != 3 || r.Usage.PromptTokens != len(prompt) || r.Usage.CompletionTokens != 9 || r.Usage.TotalTokens != len(prompt)+9 {
		t.Fatalf("three choices of h, i, <|im_end|>: %s", b)
	}
	for i, c := range r.Choices {
		if c.Index != i || c.Text != "hi" || *c.FinishReason != "stop" {
			t.Errorf("choice %d: %+v", i, c)
		}
	}
	last := prompt[len(prompt)-1:]
	want := [][]int{prompt[:len(prompt)-1], last, last, last}
	if got := f.prompts(); !slices.EqualFunc(got, want, slices.Equal) || f.sessions.Load() != 1 {
		t.Errorf("fed %v on %d sessions, want %v on one", got, f.sessions.Load(), want)
	}

	// Streamed chat: each choice's chunks carry its index, a role chunk
	// first and a finish chunk last; the usage chunk sums the choices.
	code, b, _ = post(t, f.ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"n":2,"stream":true,"stream_options":{"include_usage":true}}`)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	text := map[int]string{}
	roles, finishes := map[int]int{}, map[int]int{}
	var u *usage
	for _, ev := range events(t, b) {
		if ev == "[DONE]" {
			continue
		}
		c := decode[chatReply](t, []byte(ev))
		if c.Usage != nil {
			u = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Role != "" {
				roles[ch.Index]++
			}
			if ch.Delta.Content != nil {
				text[ch.Index] += *ch.Delta.Content
			}
			if ch.FinishReason != nil {
				finishes[ch.Index]++
			}
		}
	}
	if text[0] != "hi" || text[1] != "hi" || len(text) != 2 || roles[0] != 1 || roles[1] != 1 || finishes[0] != 1 || finishes[1] != 1 || u == nil || u.CompletionTokens != 6 {
		t.Errorf("streamed n=2: texts %v, role chunks %v, finish chunks %v, usage %+v", text, roles, finishes, u)
	}
}

// TestSeededChoices: a sampled request with a seed and "n": 3 on the real
// engine: choice 0 is the engine's own sample with that seed, choice i with
// choiceSeed(seed, i); the choices differ; the same request again gives the
// same response, and another seed another one.
func TestSeededChoices(t *testing.T) {
	m := loadReal(t)
	prompt := m.tm.Encode("Seeded")
	const n = 12
	p := sample.Params{Temperature: 1.0, TopK: 40, Seed: 42}
	var want []string
	for i := range 3 {
		q := p
		q.Seed = choiceSeed(p.Seed, i)
		out, err := m.l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: m.l.PrefillRows, EOS: m.tm.StopIDs(), Sampling: q})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, m.visible(out))
	}
	if want[0] == want[1] || want[1] == want[2] || want[0] == want[2] {
		t.Fatalf("the three seeds sample the same text: %q", want)
	}
	ts, _ := startReal(t, func(o *Options) { o.RandomSeed = true })
	texts := func(seed int) []string {
		code, b, _ := post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt":"Seeded","n":3,"max_tokens":%d,"temperature":1.0,"top_k":40,"seed":%d}`, n, seed))
		if code != 200 {
			t.Fatalf("%d %s", code, b)
		}
		var out []string
		for _, c := range decode[textReply](t, b).Choices {
			out = append(out, c.Text)
		}
		return out
	}
	first := texts(42)
	if !slices.Equal(first, want) {
		t.Errorf("seed 42, n 3: %q; the engine sampled %q", first, want)
	}
	if again := texts(42); !slices.Equal(again, first) {
		t.Errorf("the same request again: %q, first %q", again, first)
	}
	if other := texts(7); slices.Equal(other, first) {
		t.Errorf("seed 7 gave seed 42's choices %q", other)
	}
}

// TestChoicesDisconnect: a client that goes away during the first of three
// streamed choices stops it at the next token, the other two never run, and
// the next request is served.
func TestChoicesDisconnect(t *testing.T) {
	f := startFake(t, strings.Repeat("a", 1000), 2*time.Millisecond, nil, func(o *Options) { o.Generate.IgnoreEOS = true })
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", f.ts.URL+"/v1/completions",
		strings.NewReader(`{"prompt":"go on","max_tokens":1000,"n":3,"stream":true,"logprobs":1}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(resp.Body)
	for n := 0; sc.Scan() && n < 3; {
		if strings.HasPrefix(sc.Text(), "data: ") {
			n++
		}
	}
	cancel()
	resp.Body.Close()
	waitFor(t, func() bool { _, b := get(t, f.ts.URL+"/metrics"); return strings.Contains(b, "strata_busy 0\n") })
	if code, b, _ := post(t, f.ts.URL+"/v1/completions", `{"prompt":"next","max_tokens":2}`); code != 200 {
		t.Fatalf("next request: %d %s", code, b)
	}
	// Fed: the first choice's prompt but its last token, its last token,
	// then the next request's prompt; no other choice.
	if p := f.prompts(); len(p) != 3 {
		t.Errorf("fed %d windows, want 3: %v", len(p), p)
	}
}
