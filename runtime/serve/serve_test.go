package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/text/chat"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if real != nil {
		real.l.Close()
		os.RemoveAll(real.dir)
	}
	os.Exit(code)
}

// post sends a JSON body and returns the status and the body.
func post(t *testing.T, url, body string) (int, []byte, http.Header) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

// events reads an SSE body: the data lines, [DONE] included.
func events(t *testing.T, body []byte) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		out = append(out, d)
	}
	return out
}

type chatReply struct {
	ID, Object string
	Choices    []struct {
		Index        int
		Message      *message
		Delta        *message
		FinishReason *string `json:"finish_reason"`
	}
	Usage *usage
	Error *apiError
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return v
}

// visible is the reply text of tokens as a client sees it: the bytes of
// every token but the control tokens and the stop ids, decoded by the
// tokenizer.
func (m *realModel) visible(out []int) string {
	var ids []int
	for _, id := range out {
		if !m.tm.IsStop(id) && !m.tm.Tok.IsSpecial(id) {
			ids = append(ids, id)
		}
	}
	return m.tm.Tok.Decode(ids)
}

func finishOf(m *realModel, out []int, n int) string {
	if len(out) < n || m.tm.IsStop(out[len(out)-1]) {
		return "stop"
	}
	return "length"
}

// TestChatMatchesTheEngine: a chat completion, streamed and not, is the
// engine's own greedy reply to the prompt the template renders, and usage
// counts the tokenizer's tokens of that prompt and every generated token.
func TestChatMatchesTheEngine(t *testing.T) {
	ts, m := startReal(t, nil)
	msgs := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello there"}}
	rendered, err := m.tm.Template.Render(msgs, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	prompt := m.tm.Tok.Encode(rendered)
	const n = 12
	want := m.greedy(t, prompt, n)
	wantText, wantFinish := m.visible(want), finishOf(m, want, n)
	body := `{"model":"tiny","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hello "},{"type":"text","text":"there"}]}],"max_tokens":12,"temperature":0`
	code, b, _ := post(t, ts.URL+"/v1/chat/completions", body+"}")
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	r := decode[chatReply](t, b)
	if r.Object != "chat.completion" || len(r.Choices) != 1 || r.Choices[0].Message == nil || r.Choices[0].Message.Role != "assistant" {
		t.Fatalf("shape: %s", b)
	}
	if got := *r.Choices[0].Message.Content; got != wantText {
		t.Errorf("content %q, the engine made %q", got, wantText)
	}
	if *r.Choices[0].FinishReason != wantFinish {
		t.Errorf("finish_reason %q, want %q", *r.Choices[0].FinishReason, wantFinish)
	}
	u := r.Usage
	if u.PromptTokens != len(prompt) || u.CompletionTokens != len(want) || u.TotalTokens != len(prompt)+len(want) {
		t.Errorf("usage %+v, want %d prompt and %d completion tokens", *u, len(prompt), len(want))
	}

	code, b, h := post(t, ts.URL+"/v1/chat/completions", body+`,"stream":true,"stream_options":{"include_usage":true}}`)
	if code != 200 || !strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, %s: %s", code, h.Get("Content-Type"), b)
	}
	ev := events(t, b)
	if len(ev) < 4 || ev[len(ev)-1] != "[DONE]" {
		t.Fatalf("events %q", ev)
	}
	var text strings.Builder
	var finish string
	var su *usage
	for i, e := range ev[:len(ev)-1] {
		c := decode[chatReply](t, []byte(e))
		if c.Object != "chat.completion.chunk" {
			t.Fatalf("event %d: object %q", i, c.Object)
		}
		if c.Usage != nil {
			if i != len(ev)-2 || len(c.Choices) != 0 {
				t.Fatalf("event %d: usage before the end or with choices: %s", i, e)
			}
			su = c.Usage
			continue
		}
		d := c.Choices[0].Delta
		if i == 0 && d.Role != "assistant" {
			t.Errorf("first delta %s: want the role", e)
		}
		if d.Content != nil {
			text.WriteString(*d.Content)
		}
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if text.String() != wantText || finish != wantFinish {
		t.Errorf("streamed %q (%s), the engine made %q (%s)", text.String(), finish, wantText, wantFinish)
	}
	if su == nil || su.PromptTokens != len(prompt) || su.CompletionTokens != len(want) {
		t.Errorf("streamed usage %+v, want %d and %d", su, len(prompt), len(want))
	}
}

type textReply struct {
	Object  string
	Choices []struct {
		Text         string
		FinishReason *string `json:"finish_reason"`
	}
	Usage *usage
}

func idsJSON(ids []int) string {
	b, _ := json.Marshal(ids)
	return string(b)
}

// TestCompletionsStopString: a stop string ends the reply before it, on the
// real engine, streamed and not; completion_tokens counts the tokens made up
// to the one that completed it.
func TestCompletionsStopString(t *testing.T) {
	ts, m := startReal(t, nil)
	const n = 24
	// The stop string is a printable byte the model makes after its first
	// token (every id below 256 is one byte here), for the first of these
	// prompts whose reply has one.
	var prompt, ref []int
	var ptext string
	at := -1
	for _, p := range []string{"The quick brown fox", "package main", "func (s *Server)", "Hello", "abc", "0123456789", "if err != nil {"} {
		prompt, ptext = m.tm.Encode(p), p
		ref = m.greedy(t, prompt, n)
		for i, id := range ref[1:] {
			if id > ' ' && id < 0x7f {
				at = i + 1
				break
			}
		}
		if at > 0 {
			break
		}
	}
	if at < 0 {
		t.Fatalf("no printable byte in any reply")
	}
	stop := string(rune(ref[at]))
	first := slices.Index(ref, ref[at])
	wantText := m.visible(ref[:first])
	code, b, _ := post(t, ts.URL+"/v1/completions", `{"prompt":`+string(mustJSON(ptext))+`,"max_tokens":24,"stop":`+string(mustJSON(stop))+`}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	r := decode[textReply](t, b)
	if r.Object != "text_completion" || r.Choices[0].Text != wantText || *r.Choices[0].FinishReason != "stop" {
		t.Errorf("got %s; want text %q, finish stop", b, wantText)
	}
	if r.Usage.CompletionTokens != first+1 || r.Usage.PromptTokens != len(prompt) {
		t.Errorf("usage %+v, want %d prompt and %d completion tokens", *r.Usage, len(prompt), first+1)
	}
	// Streamed, with the stop in an array and the prompt as ids.
	code, b, _ = post(t, ts.URL+"/v1/completions", `{"prompt":`+idsJSON(prompt)+`,"max_tokens":24,"stream":true,"stop":["zzzz",`+string(mustJSON(stop))+`]}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	ev := events(t, b)
	var text strings.Builder
	for _, e := range ev[:len(ev)-1] {
		c := decode[textReply](t, []byte(e))
		text.WriteString(c.Choices[0].Text)
	}
	if text.String() != wantText || ev[len(ev)-1] != "[DONE]" {
		t.Errorf("streamed %q, want %q", text.String(), wantText)
	}
}

// TestErrors: bad requests get OpenAI's error object with the status, the
// field named.
func TestErrors(t *testing.T) {
	ts, m := startReal(t, func(o *Options) { o.MaxBody = 4096 })
	long := idsJSON(make([]int, m.l.Config.Runtime.ContextLength))
	for _, c := range []struct {
		path, body string
		status     int
		param      string
		code       string
	}{
		{"/v1/chat/completions", `{"messages": [`, 400, "", "invalid_json"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "temperature": "hot"}`, 400, "temperature", "invalid_type"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "max_tokens": 1.5}`, 400, "max_tokens", "invalid_type"},
		{"/v1/chat/completions", `{"messages": "hi"}`, 400, "messages", "invalid_type"},
		{"/v1/chat/completions", `{}`, 400, "messages", "missing_field"},
		{"/v1/chat/completions", `{"messages": [{"content":"hi"}]}`, 400, "messages[0].role", "invalid_value"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages[0].content[0]", "unsupported_value"},
		{"/v1/chat/completions", `{"model":"gpt-4","messages": [{"role":"user","content":"hi"}]}`, 404, "model", "model_not_found"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "n": 0}`, 400, "n", "invalid_value"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "n": 129}`, 400, "n", "invalid_value"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "logprobs": 3}`, 400, "logprobs", "invalid_type"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "top_logprobs": 3}`, 400, "top_logprobs", "invalid_value"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "logprobs": true, "top_logprobs": 21}`, 400, "top_logprobs", "invalid_value"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "logprobs": true, "top_logprobs": -1}`, 400, "top_logprobs", "invalid_value"},
		{"/v1/completions", `{"prompt": "hi", "logprobs": true}`, 400, "logprobs", "invalid_type"},
		{"/v1/completions", `{"prompt": "hi", "logprobs": 21}`, 400, "logprobs", "invalid_value"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "top_p": 0}`, 400, "top_p", "invalid_value"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "stop": 3}`, 400, "stop", "invalid_type"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"hi"}], "response_format": {"type":"xml"}}`, 400, "response_format.type", "invalid_value"},
		{"/v1/chat/completions", `{"messages": [{"role":"user","content":"` + strings.Repeat("x", 5000) + `"}]}`, 413, "", ""},
		{"/v1/completions", `{"prompt": ` + long + `}`, 400, "prompt", "context_length_exceeded"},
		{"/v1/completions", `{"prompt": [1, 99999]}`, 400, "prompt", "invalid_value"},
		{"/v1/completions", `{"prompt": ""}`, 400, "prompt", "invalid_value"},
		{"/v1/completions", `{"prompt": "hi", "max_tokens": 0}`, 400, "max_tokens", "invalid_value"},
		{"/v1/completions", `[1, 2]`, 400, "", ""},
	} {
		code, b, _ := post(t, ts.URL+c.path, c.body)
		r := decode[chatReply](t, b)
		if code != c.status || r.Error == nil || r.Error.Message == "" || r.Error.Type == "" {
			t.Errorf("%.60s: status %d %s, want %d with an error object", c.body, code, b, c.status)
			continue
		}
		if p := r.Error.Param; c.param != "" && (p == nil || *p != c.param) {
			t.Errorf("%.60s: param %v, want %q (%s)", c.body, p, c.param, b)
		}
		if k := r.Error.Code; c.code != "" && (k == nil || *k != c.code) {
			t.Errorf("%.60s: code %v, want %q (%s)", c.body, k, c.code, b)
		}
	}
	resp, err := http.Get(ts.URL + "/v1/models/gpt-4")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("unknown model: status %d", resp.StatusCode)
	}
	// The server still answers.
	if code, b, _ := post(t, ts.URL+"/v1/completions", `{"prompt":"hi","max_tokens":2}`); code != 200 {
		t.Errorf("after the errors: %d %s", code, b)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestModelsHealthMetrics: the model list, health, and the metrics counting
// what was served.
func TestModelsHealthMetrics(t *testing.T) {
	ts, _ := startReal(t, nil)
	code, b := get(t, ts.URL+"/v1/models")
	var list struct {
		Object string
		Data   []modelObject
	}
	json.Unmarshal([]byte(b), &list)
	if code != 200 || list.Object != "list" || len(list.Data) != 1 || list.Data[0].ID != "tiny" || list.Data[0].Object != "model" {
		t.Errorf("models: %d %s", code, b)
	}
	if code, b := get(t, ts.URL+"/v1/models/tiny"); code != 200 || !strings.Contains(b, `"id":"tiny"`) {
		t.Errorf("model: %d %s", code, b)
	}
	if code, b := get(t, ts.URL+"/health"); code != 200 || !strings.Contains(b, "ok") {
		t.Errorf("health: %d %s", code, b)
	}
	_, b1, _ := post(t, ts.URL+"/v1/completions", `{"prompt":[1,2,3],"max_tokens":3,"ignore_eos":true}`)
	r := decode[textReply](t, b1)
	_, b = get(t, ts.URL+"/metrics")
	for _, want := range []string{
		`strata_requests_total{endpoint="/v1/completions",code="200"} 1`,
		`strata_requests_total{endpoint="/v1/models",code="200"} 1`,
		"strata_prompt_tokens_total 3\n",
		"strata_generated_tokens_total " + strconv.Itoa(r.Usage.CompletionTokens) + "\n",
		"strata_queue_depth 0\n",
		"# TYPE strata_decode_tokens_per_second gauge",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

// TestPrefixReuse: a prompt that extends the kept session's tokens
// prefills only the new ones and gets the reply a fresh session gives the
// whole prompt; cached_tokens counts the reused ones; another prompt starts
// over.
func TestPrefixReuse(t *testing.T) {
	ts, m := startReal(t, nil)
	p1 := m.tm.Encode("first turn")
	code, b, _ := post(t, ts.URL+"/v1/completions", `{"prompt":`+idsJSON(p1)+`,"max_tokens":6}`)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	out1 := m.greedy(t, p1, 6)
	if len(out1) < 2 {
		t.Skipf("the reply ended at once: %v", out1)
	}
	p2 := append(append(slices.Clone(p1), out1...), m.tm.Encode(" and the second")...)
	check := func(prompt []int, cached int) {
		t.Helper()
		code, b, _ := post(t, ts.URL+"/v1/completions", `{"prompt":`+idsJSON(prompt)+`,"max_tokens":6}`)
		if code != 200 {
			t.Fatalf("%d %s", code, b)
		}
		r := decode[textReply](t, b)
		want := m.greedy(t, prompt, 6)
		if r.Choices[0].Text != m.visible(want) || r.Usage.CompletionTokens != len(want) {
			t.Errorf("reply %q (%d tokens), a fresh session makes %q (%d)", r.Choices[0].Text, r.Usage.CompletionTokens, m.visible(want), len(want))
		}
		if r.Usage.PromptTokens != len(prompt) || r.Usage.PromptTokensDetails.CachedTokens != cached {
			t.Errorf("usage %+v, want %d prompt tokens, %d cached", *r.Usage, len(prompt), cached)
		}
	}
	// greedy ran on the model's memory: the server's session is stale now,
	// so the server must not be trusted to reuse it. Serve again to rebuild.
	post(t, ts.URL+"/v1/completions", `{"prompt":`+idsJSON(p1)+`,"max_tokens":6}`)
	check(p2, len(p1)+len(out1)-1)
	check(m.tm.Encode("something else"), 0)
}

// TestConcurrentLoad: 16 clients × 4 requests at once against a queue of 4:
// each request completes with its own prompt's reply (the engine's, made
// alone) or gets 503; none is lost or mixed into another. The process's RSS
// before and after is logged.
func TestConcurrentLoad(t *testing.T) {
	m := loadReal(t)
	const clients, each, n = 16, 4, 6
	prompts := make([][]int, clients*each)
	want := make([]string, len(prompts))
	for i := range prompts {
		prompts[i] = m.tm.Encode(fmt.Sprintf("request %d of the load test", i))
		want[i] = m.visible(m.greedy(t, prompts[i], n))
	}
	ts, _ := startReal(t, func(o *Options) { o.Queue = 4 })
	rss0 := rssKB()
	var wg sync.WaitGroup
	codes := make([]int, len(prompts))
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range each {
				i := c*each + k
				body := fmt.Sprintf(`{"prompt":%s,"max_tokens":%d,"stream":%v}`, idsJSON(prompts[i]), n, i%2 == 0)
				resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				codes[i] = resp.StatusCode
				switch {
				case resp.StatusCode == 503:
					if resp.Header.Get("Retry-After") == "" {
						t.Errorf("request %d: 503 without Retry-After", i)
					}
				case resp.StatusCode != 200:
					t.Errorf("request %d: %d %s", i, resp.StatusCode, b)
				case i%2 == 0:
					var text strings.Builder
					ev := events(t, b)
					for _, e := range ev[:len(ev)-1] {
						var c textReply
						json.Unmarshal([]byte(e), &c)
						text.WriteString(c.Choices[0].Text)
					}
					if text.String() != want[i] {
						t.Errorf("request %d streamed %q, its reply is %q", i, text.String(), want[i])
					}
				default:
					var r textReply
					json.Unmarshal(b, &r)
					if r.Choices[0].Text != want[i] || r.Usage.PromptTokens != len(prompts[i]) {
						t.Errorf("request %d: %q (%d prompt tokens), its reply is %q (%d)", i, r.Choices[0].Text, r.Usage.PromptTokens, want[i], len(prompts[i]))
					}
				}
			}
		}()
	}
	wg.Wait()
	ok := 0
	for _, c := range codes {
		if c == 200 {
			ok++
		}
	}
	t.Logf("%d of %d requests served, the others 503; RSS %d kB before, %d kB after", ok, len(codes), rss0, rssKB())
	if ok < 5 { // the running one and the queue's 4 at least
		t.Errorf("only %d requests served", ok)
	}
	_, b := get(t, ts.URL+"/metrics")
	if want := fmt.Sprintf(`strata_requests_total{endpoint="/v1/completions",code="200"} %d`, ok); !strings.Contains(b, want) {
		t.Errorf("metrics lack %q:\n%s", want, b)
	}
}

// TestStateCache: two conversations taking turns. With a state cache each
// turn resumes its own conversation's saved state (cached_tokens: all it had
// consumed) and gets the reply a fresh session gives its whole prompt;
// without one, only the live session is reused, so every turn starts over.
func TestStateCache(t *testing.T) {
	m := loadReal(t)
	const n = 3
	// The turns, and their replies from fresh sessions (before any server
	// runs: the reference uses the model's memory).
	var turns []turnCase
	prev := map[int][]int{}
	for k := range 6 {
		c := k % 2
		p := append(slices.Clone(prev[c]), m.tm.Encode(fmt.Sprintf(" conversation %d turn %d:", c, k/2))...)
		out := m.greedy(t, p, n)
		cached := 0
		if k >= 2 {
			cached = len(prev[c]) - 1 // the last reply's last token is fed with this prompt
		}
		turns = append(turns, turnCase{p, m.visible(out), cached})
		prev[c] = append(p, out...)
		if len(out) != n {
			t.Fatalf("turn %d: the reply ended early (%v); the prompts need changing", k, out)
		}
	}
	for _, cacheBytes := range []int64{64 << 20, 0} {
		t.Run(fmt.Sprint("cache=", cacheBytes), func(t *testing.T) { stateCacheTurns(t, cacheBytes, n, turns) })
	}
}

func stateCacheTurns(t *testing.T, cacheBytes int64, n int, turns []turnCase) {
	{
		ts, _ := startReal(t, func(o *Options) { o.CacheBytes = cacheBytes })
		for k, tr := range turns {
			code, b, _ := post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":%d}`, idsJSON(tr.prompt), n))
			if code != 200 {
				t.Fatalf("turn %d: %d %s", k, code, b)
			}
			r := decode[textReply](t, b)
			want := tr.cached
			if cacheBytes == 0 {
				want = 0
			}
			if r.Choices[0].Text != tr.want || r.Usage.PromptTokensDetails.CachedTokens != want {
				t.Errorf("cache %d, turn %d: %q with %d cached, want %q with %d", cacheBytes, k, r.Choices[0].Text, r.Usage.PromptTokensDetails.CachedTokens, tr.want, want)
			}
		}
		_, b := get(t, ts.URL+"/metrics")
		if cacheBytes > 0 && !strings.Contains(b, "strata_state_cache_restores_total 4\n") {
			t.Errorf("metrics:\n%s", b)
		}
	}
}

type turnCase struct {
	prompt []int
	want   string
	cached int
}

// rssKB is the process's resident set in kB (Linux; 0 elsewhere).
func rssKB() int {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			return n
		}
	}
	return 0
}

// TestRewindToTurnBoundary: a prompt that departs from the kept tokens right
// after the last prompt (a regenerated or re-rendered reply) rewinds the
// session to the mark taken there and prefills only from it, with the reply
// a fresh session gives the whole prompt.
func TestRewindToTurnBoundary(t *testing.T) {
	m := loadReal(t)
	const n = 4
	p1 := m.tm.Encode("first prompt:")
	out1 := m.greedy(t, p1, n)
	x := m.tm.Encode(" another reply")
	if x[0] == out1[0] {
		x = m.tm.Encode("_another reply")
	}
	p2 := append(slices.Clone(p1), x...)
	out2 := m.greedy(t, p2, n)
	p3 := append(append(slices.Clone(p2), out2...), m.tm.Encode(" and on")...)
	out3 := m.greedy(t, p3, n)
	ts, _ := startReal(t, nil)
	for k, c := range []struct {
		prompt, want []int
		cached       int
	}{{p1, out1, 0}, {p2, out2, len(p1)}, {p3, out3, len(p2) + n - 1}} {
		code, b, _ := post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"prompt":%s,"max_tokens":%d}`, idsJSON(c.prompt), n))
		if code != 200 {
			t.Fatalf("request %d: %d %s", k, code, b)
		}
		r := decode[textReply](t, b)
		if r.Choices[0].Text != m.visible(c.want) || r.Usage.PromptTokensDetails.CachedTokens != c.cached {
			t.Errorf("request %d: %q with %d cached, want %q with %d", k, r.Choices[0].Text, r.Usage.PromptTokensDetails.CachedTokens, m.visible(c.want), c.cached)
		}
	}
}

// TestSampledRequest: a sampled request with a seed is the engine's own
// sampled reply with those parameters, the same each time; ignore_eos runs
// to max_tokens.
func TestSampledRequest(t *testing.T) {
	m := loadReal(t)
	prompt := m.tm.Encode("Sample me")
	p := sample.Params{Temperature: 1.3, TopK: 50, TopP: 0.9, MinP: 0.01, PresencePenalty: 0.5, PenaltyLastN: 64, Seed: 42}
	s := m.l.Model.NewSession()
	want, err := s.Generate(prompt, 10, engine.GenerateOptions{PrefillRows: m.l.PrefillRows, EOS: m.tm.StopIDs(), Sampling: p})
	if err != nil {
		t.Fatal(err)
	}
	ts, _ := startReal(t, func(o *Options) { o.Generate.Sampling.PenaltyLastN = 64; o.RandomSeed = true })
	body := `{"prompt":"Sample me","max_tokens":10,"temperature":1.3,"top_k":50,"top_p":0.9,"min_p":0.01,"presence_penalty":0.5,"seed":42}`
	for i := range 2 {
		code, b, _ := post(t, ts.URL+"/v1/completions", body)
		r := decode[textReply](t, b)
		if code != 200 || r.Choices[0].Text != m.visible(want) || r.Usage.CompletionTokens != len(want) {
			t.Errorf("request %d: %d %s; the engine sampled %q", i, code, b, m.visible(want))
		}
	}
}

// TestIgnoreEOS: "ignore_eos" (llama-server's field) runs past the end of
// turn to max_tokens, on both endpoints; "ignore_eos": false overrides a
// server that ignores EOS by default.
func TestIgnoreEOS(t *testing.T) {
	f := startFake(t, "ab", 0, nil, nil)
	g := startFake(t, "ab", 0, nil, func(o *Options) { o.Generate.IgnoreEOS = true })
	for _, c := range []struct {
		url, path, body, text, finish string
		tokens                        int
	}{
		{f.ts.URL, "/v1/completions", `{"prompt":"x","max_tokens":10}`, "ab", "stop", 3},
		{f.ts.URL, "/v1/completions", `{"prompt":"x","max_tokens":10,"ignore_eos":true}`, "abababa", "length", 10},
		{f.ts.URL, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":10}`, "ab", "stop", 3},
		{f.ts.URL, "/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":10,"ignore_eos":true}`, "abababa", "length", 10},
		{g.ts.URL, "/v1/completions", `{"prompt":"x","max_tokens":10}`, "abababa", "length", 10},
		{g.ts.URL, "/v1/completions", `{"prompt":"x","max_tokens":10,"ignore_eos":false}`, "ab", "stop", 3},
	} {
		code, b, _ := post(t, c.url+c.path, c.body)
		r := decode[lpChatReply](t, b)
		text := ""
		if strings.Contains(c.path, "chat") {
			text = *r.Choices[0].Message.Content
		} else {
			text = decode[textReply](t, b).Choices[0].Text
		}
		if code != 200 || text != c.text || *r.Choices[0].FinishReason != c.finish || r.Usage.CompletionTokens != c.tokens {
			t.Errorf("%s %s: %d %s; want %q, %s, %d tokens", c.path, c.body, code, b, c.text, c.finish, c.tokens)
		}
	}
}
