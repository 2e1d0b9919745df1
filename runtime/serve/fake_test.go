package serve

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/text/chat"
)

// fakeServer serves the byte-level tokenizer over fake sessions that reply
// with reply's bytes (then <|im_end|>); sessions counts NewSession calls.
type fakeServer struct {
	ts       *httptest.Server
	fed      [][]int
	sessions atomic.Int32
	mu       sync.Mutex
}

func startFake(t *testing.T, reply string, delay time.Duration, hook func([]int), edit func(*Options)) *fakeServer {
	m := loadReal(t)
	f := &fakeServer{}
	var toks []int
	for _, b := range []byte(reply) {
		toks = append(toks, int(b))
	}
	toks = append(toks, imEnd)
	opt := Options{Model: "fake", Text: m.tm, Context: 4096, Vocab: 512, Queue: 4, Timeout: time.Minute,
		Generate: engine.GenerateOptions{PrefillRows: 8},
		NewSession: func() Session {
			f.sessions.Add(1)
			return &fakeSession{mu: &f.mu, reply: toks, delay: delay, fed: &f.fed, hook: hook}
		}}
	if edit != nil {
		edit(&opt)
	}
	s, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	f.ts = httptest.NewServer(s.Handler())
	t.Cleanup(func() {
		f.ts.Close()
		s.Close()
	})
	return f
}

func (f *fakeServer) prompts() [][]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.fed)
}

// TestQueueFull: one request runs, --queue more wait, the next gets 503
// with Retry-After; the waiting ones then complete in order.
func TestQueueFull(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int32
	f := startFake(t, "ok", 0, func(p []int) {
		if started.Add(1) == 1 {
			<-release
		}
	}, func(o *Options) { o.Queue = 2 })
	type res struct {
		code int
		body string
	}
	results := make(chan res, 3)
	send := func(i int) {
		code, b, _ := post(t, f.ts.URL+"/v1/completions", `{"prompt":"request `+string(rune('0'+i))+`","max_tokens":4}`)
		results <- res{code, string(b)}
	}
	go send(0)
	for started.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	go send(1)
	go send(2)
	waitFor(t, func() bool {
		code, b := get(t, f.ts.URL+"/metrics")
		return code == 200 && strings.Contains(b, "strata_queue_depth 2\n")
	})
	code, b, h := post(t, f.ts.URL+"/v1/completions", `{"prompt":"one too many"}`)
	if code != 503 || h.Get("Retry-After") == "" || !strings.Contains(string(b), "queue_full") {
		t.Errorf("beyond the queue: %d, Retry-After %q: %s", code, h.Get("Retry-After"), b)
	}
	close(release)
	for range 3 {
		if r := <-results; r.code != 200 || !strings.Contains(r.body, `"text":"ok"`) {
			t.Errorf("queued request: %d %s", r.code, r.body)
		}
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
	}
}

// TestDisconnectCancels: a client that goes away mid-stream stops its
// generation at the next token, and the engine serves the next request.
func TestDisconnectCancels(t *testing.T) {
	f := startFake(t, strings.Repeat("a", 1000), 2*time.Millisecond, nil, func(o *Options) {
		o.Generate.IgnoreEOS = true
	})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", f.ts.URL+"/v1/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":"go on"}],"max_tokens":1000,"stream":true}`))
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
	// The worker is free again well before the 1000 tokens (2 s) would end.
	start := time.Now()
	waitFor(t, func() bool { _, b := get(t, f.ts.URL+"/metrics"); return strings.Contains(b, "strata_busy 0\n") })
	code, b, _ := post(t, f.ts.URL+"/v1/completions", `{"prompt":"next","max_tokens":2}`)
	if code != 200 {
		t.Fatalf("next request: %d %s", code, b)
	}
	_, m := get(t, f.ts.URL+"/metrics")
	var n int
	for _, l := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(l, "strata_generated_tokens_total "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	if n < 4 || n > 500 || time.Since(start) > time.Second {
		t.Errorf("the cancelled generation ran on: %d tokens generated, the engine free after %v", n, time.Since(start))
	}
	t.Logf("%d tokens generated in all, the engine free %v after the disconnect", n, time.Since(start))
}

// TestPanicRecovered: a panic in a generation answers 500 with the error
// object, the session starts over, and the server keeps serving.
func TestPanicRecovered(t *testing.T) {
	f := startFake(t, "fine", 0, func(p []int) {
		if slices.Contains(p, int('!')) {
			panic("boom")
		}
	}, nil)
	code, b, _ := post(t, f.ts.URL+"/v1/completions", `{"prompt":"crash!","max_tokens":3}`)
	if code != 500 || !strings.Contains(string(b), "boom") || !strings.Contains(string(b), `"error"`) {
		t.Errorf("panic: %d %s", code, b)
	}
	before := f.sessions.Load()
	code, b, _ = post(t, f.ts.URL+"/v1/completions", `{"prompt":"again","max_tokens":3}`)
	if code != 200 || !strings.Contains(string(b), `"text":"fin"`) {
		t.Errorf("after the panic: %d %s", code, b)
	}
	if f.sessions.Load() != before+1 {
		t.Errorf("the session was not started over after the panic")
	}
}

// TestChatTurnReusesTheSession: the second turn of a chat, rendered by the
// template with the first reply, feeds only the tokens after what the
// session holds.
func TestChatTurnReusesTheSession(t *testing.T) {
	m := loadReal(t)
	f := startFake(t, "Hi!", 0, nil, nil)
	turn := func(msgs []chat.Message) chatReply {
		body, _ := jsonMarshal(map[string]any{"messages": msgs, "max_tokens": 10})
		code, b, _ := post(t, f.ts.URL+"/v1/chat/completions", string(body))
		if code != 200 {
			t.Fatalf("%d %s", code, b)
		}
		return decode[chatReply](t, b)
	}
	msgs := []chat.Message{{Role: "user", Content: "Hello"}}
	r1 := turn(msgs)
	if got := *r1.Choices[0].Message.Content; got != "Hi!" || *r1.Choices[0].FinishReason != "stop" || r1.Usage.CompletionTokens != 4 {
		t.Fatalf("turn 1: %q %s %+v", got, *r1.Choices[0].FinishReason, *r1.Usage)
	}
	msgs = append(msgs, chat.Message{Role: "assistant", Content: "Hi!"}, chat.Message{Role: "user", Content: "More"})
	r2 := turn(msgs)
	first, _ := m.tm.Template.Render(msgs[:1], chat.Options{AddGenerationPrompt: true})
	whole, _ := m.tm.Template.Render(msgs, chat.Options{AddGenerationPrompt: true})
	kept := len(m.tm.Tok.Encode(first)) + 3 // the prompt and the reply but its last token (<|im_end|>)
	fed := f.prompts()
	if len(fed) != 2 || f.sessions.Load() != 1 {
		t.Fatalf("%d prompts fed on %d sessions", len(fed), f.sessions.Load())
	}
	if want := m.tm.Tok.Encode(whole)[kept:]; !slices.Equal(fed[1], want) {
		t.Errorf("turn 2 fed %v, want the new tokens %v", fed[1], want)
	}
	if u := r2.Usage; u.PromptTokens != len(m.tm.Tok.Encode(whole)) || u.PromptTokensDetails.CachedTokens != kept {
		t.Errorf("turn 2 usage %+v, want %d cached", *u, kept)
	}
}

// toolReply is a Qwen reply that thinks, says something and calls a tool.
const toolReply = "<think>\nThe user wants weather.\n</think>\n\nLet me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>"

// TestThinkingChatRewinds: Qwen3's template drops the last reply's thinking
// when it renders the next turn, so the prompt departs from what the session
// holds inside that reply; the session rewinds to the end of the previous
// prompt and feeds only what follows it.
func TestThinkingChatRewinds(t *testing.T) {
	m := loadReal(t)
	f := startFake(t, "<think>\nhmm\n</think>\n\nHi!", 0, nil, nil)
	turn := func(msgs []chat.Message) chatReply {
		body, _ := jsonMarshal(map[string]any{"messages": msgs, "max_tokens": 100})
		code, b, _ := post(t, f.ts.URL+"/v1/chat/completions", string(body))
		if code != 200 {
			t.Fatalf("%d %s", code, b)
		}
		return decode[chatReply](t, b)
	}
	msgs := []chat.Message{{Role: "user", Content: "Hello"}}
	r1 := turn(msgs)
	if got := r1.Choices[0].Message; *got.Content != "Hi!" || got.ReasoningContent != "hmm" {
		t.Fatalf("turn 1: %+v", got)
	}
	msgs = append(msgs, chat.Message{Role: "assistant", Content: "Hi!"}, chat.Message{Role: "user", Content: "More"})
	r2 := turn(msgs)
	first, _ := m.tm.Template.Render(msgs[:1], chat.Options{AddGenerationPrompt: true})
	whole, _ := m.tm.Template.Render(msgs, chat.Options{AddGenerationPrompt: true})
	if strings.Contains(whole, "hmm") {
		t.Fatalf("the template kept the thinking: %q", whole)
	}
	boundary := len(m.tm.Tok.Encode(first))
	fed := f.prompts()
	if want := m.tm.Tok.Encode(whole)[boundary:]; len(fed) != 2 || !slices.Equal(fed[1], want) || f.sessions.Load() != 1 {
		t.Errorf("turn 2 fed %v on %d sessions, want the tokens after the first prompt %v", fed[len(fed)-1], f.sessions.Load(), want)
	}
	if c := r2.Usage.PromptTokensDetails.CachedTokens; c != boundary {
		t.Errorf("turn 2: %d cached, want %d", c, boundary)
	}
}

// TestToolCallsAndReasoning: the model's <think> block and <tool_call>
// JSON come back as reasoning_content and tool_calls, streamed and not.
func TestToolCallsAndReasoning(t *testing.T) {
	f := startFake(t, toolReply, 0, nil, nil)
	body := `{"messages":[{"role":"user","content":"Weather in Paris?"}],"max_tokens":400,
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]`
	code, b, _ := post(t, f.ts.URL+"/v1/chat/completions", body+"}")
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	r := decode[chatReply](t, b)
	msg := r.Choices[0].Message
	if *r.Choices[0].FinishReason != "tool_calls" || msg.ReasoningContent != "The user wants weather." || msg.Content == nil || *msg.Content != "Let me look." {
		t.Errorf("message %s", b)
	}
	if len(msg.ToolCalls) != 1 || msg.ToolCalls[0].Type != "function" || !strings.HasPrefix(msg.ToolCalls[0].ID, "call_") ||
		msg.ToolCalls[0].Function.Name != "get_weather" || msg.ToolCalls[0].Function.Arguments != `{"city":"Paris","unit":"c"}` || msg.ToolCalls[0].Index != nil {
		t.Errorf("tool calls %+v", msg.ToolCalls)
	}
	// The rendered prompt carried the tools.
	if p := loadReal(t).tm.Tok.Decode(f.prompts()[0]); !strings.Contains(p, `"name": "get_weather"`) || !strings.Contains(p, "<tools>") {
		t.Errorf("the prompt lacks the tools: %q", p)
	}
	code, b, _ = post(t, f.ts.URL+"/v1/chat/completions", body+`,"stream":true}`)
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	var content, reasoning strings.Builder
	var calls []toolCall
	var finish string
	for _, e := range events(t, b) {
		if e == "[DONE]" {
			continue
		}
		c := decode[chatReply](t, []byte(e))
		d := c.Choices[0].Delta
		if d.Content != nil {
			content.WriteString(*d.Content)
		}
		reasoning.WriteString(d.ReasoningContent)
		calls = append(calls, d.ToolCalls...)
		if c.Choices[0].FinishReason != nil {
			finish = *c.Choices[0].FinishReason
		}
	}
	if content.String() != "Let me look." || reasoning.String() != "The user wants weather." || finish != "tool_calls" {
		t.Errorf("streamed content %q, reasoning %q, finish %q", content.String(), reasoning.String(), finish)
	}
	if len(calls) != 1 || calls[0].Index == nil || *calls[0].Index != 0 || calls[0].Function.Arguments != `{"city":"Paris","unit":"c"}` {
		t.Errorf("streamed tool calls %+v", calls)
	}
	// The call sent back with the tool's result renders as Qwen expects.
	round := `{"messages":[{"role":"user","content":"Weather in Paris?"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
		{"role":"tool","tool_call_id":"call_1","content":"18 C, sunny"}],"max_tokens":4,
		"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]}`
	if code, b, _ := post(t, f.ts.URL+"/v1/chat/completions", round); code != 200 {
		t.Fatalf("tool round trip: %d %s", code, b)
	}
	fed := f.prompts()
	p := loadReal(t).tm.Tok.Decode(fed[len(fed)-1])
	for _, want := range []string{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Paris\"}}\n</tool_call>",
		"<tool_response>\n18 C, sunny\n</tool_response>"} {
		if !strings.Contains(p, want) {
			t.Errorf("the round trip's prompt lacks %q:\n%s", want, p)
		}
	}
	// Without tools the tag is plain text.
	code, b, _ = post(t, f.ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}],"max_tokens":400}`)
	if r := decode[chatReply](t, b); code != 200 || len(r.Choices[0].Message.ToolCalls) != 0 || !strings.Contains(*r.Choices[0].Message.Content, "<tool_call>") {
		t.Errorf("without tools: %s", b)
	}
}

// TestStalledReaderReleasesTheEngine: a streaming client that stops reading
// (its connection open) loses its stream once a write waits past the write
// timeout, and the engine serves the next request.
func TestStalledReaderReleasesTheEngine(t *testing.T) {
	f := startFake(t, strings.Repeat("word ", 200), 0, nil, func(o *Options) {
		o.Generate.IgnoreEOS = true
		o.WriteTimeout = 200 * time.Millisecond
		o.Context = 1 << 30
	})
	conn, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"prompt":"go","max_tokens":3000000,"stream":true}`
	fmt.Fprintf(conn, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	// Never read: the socket buffers fill and a write blocks.
	waitFor(t, func() bool { _, b := get(t, f.ts.URL+"/metrics"); return strings.Contains(b, "strata_busy 1\n") })
	waitFor(t, func() bool { _, b := get(t, f.ts.URL+"/metrics"); return strings.Contains(b, "strata_busy 0\n") })
	if code, b, _ := post(t, f.ts.URL+"/v1/completions", `{"prompt":"next","max_tokens":2}`); code != 200 {
		t.Fatalf("next request: %d %s", code, b)
	}
}

// TestEngineMetrics: the engine's counters, read after each request, show as
// expert and speculation metrics with their ratios.
func TestEngineMetrics(t *testing.T) {
	f := startFake(t, "ok", 0, nil, func(o *Options) {
		o.EngineStats = func() EngineStats {
			return EngineStats{Streaming: true, ExpertHits: 30, ExpertMisses: 10, Spec: true, Drafted: 8, Accepted: 6}
		}
	})
	_, before := get(t, f.ts.URL+"/metrics")
	if strings.Contains(before, "strata_expert") {
		t.Errorf("engine metrics before any request:\n%s", before)
	}
	post(t, f.ts.URL+"/v1/completions", `{"prompt":"x"}`)
	_, b := get(t, f.ts.URL+"/metrics")
	for _, want := range []string{"strata_expert_hits_total 30\n", "strata_expert_misses_total 10\n", "strata_expert_hit_ratio 0.75\n",
		"strata_spec_drafted_total 8\n", "strata_spec_accepted_total 6\n", "strata_spec_acceptance_ratio 0.75\n"} {
		if !strings.Contains(b, want) {
			t.Errorf("metrics lack %q:\n%s", want, b)
		}
	}
}

// TestDeadline: a request that runs past --timeout ends with 504 (or, once
// its stream has started, an error event), and the engine moves on.
func TestDeadline(t *testing.T) {
	f := startFake(t, strings.Repeat("a", 1000), 5*time.Millisecond, nil, func(o *Options) {
		o.Generate.IgnoreEOS = true
		o.Timeout = 100 * time.Millisecond
	})
	code, b, _ := post(t, f.ts.URL+"/v1/completions", `{"prompt":"x","max_tokens":1000}`)
	if code != 504 || !strings.Contains(string(b), `"timeout"`) {
		t.Errorf("past the deadline: %d %s", code, b)
	}
	code, b, _ = post(t, f.ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"max_tokens":1000,"stream":true}`)
	ev := events(t, b)
	if code != 200 || len(ev) < 3 || !strings.Contains(ev[len(ev)-2], `"timeout"`) || ev[len(ev)-1] != "[DONE]" {
		t.Errorf("stream past the deadline: %d, last events %q", code, ev[max(len(ev)-2, 0):])
	}
	if code, b, _ := post(t, f.ts.URL+"/v1/completions", `{"prompt":"x","max_tokens":3}`); code != 200 {
		t.Errorf("after the deadlines: %d %s", code, b)
	}
}
