package serve

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/text"
	"github.com/strata-llm/strata/runtime/text/chat"
)

// chatModel is tiny-go-chat (the default model of strata serve), loaded
// once on the cpu backend.
type chatModel struct {
	l  *load.Loaded
	tm *text.Model
	mu sync.Mutex // one server at a time uses the model's memory
}

var (
	chatOnce sync.Once
	chatM    *chatModel
	chatErr  error
)

func loadChat(t testing.TB) *chatModel {
	t.Helper()
	chatOnce.Do(func() {
		d, err := os.MkdirTemp("", "serve-chat-")
		if err != nil {
			chatErr = err
			return
		}
		defer os.RemoveAll(d) // the checkpoint stays mapped
		dir := filepath.Join(d, load.TinyGoChat)
		if chatErr = e2e.WriteTinyGoChat(dir); chatErr != nil {
			return
		}
		l, err := load.HF(dir, withGenerator(load.Options{Backend: load.BackendCPU, Context: 1024}))
		if err != nil {
			chatErr = err
			return
		}
		tm, err := text.FromHF(dir)
		if err != nil {
			chatErr = err
			return
		}
		chatM = &chatModel{l: l, tm: tm}
	})
	if chatErr != nil {
		t.Fatal(chatErr)
	}
	return chatM
}

// startChat serves tiny-go-chat until stop is called or the test ends,
// with lanes sessions of their own state taking turns when given
// (--parallel). Stopping waits for the server's worker, so the engine may
// run here again.
func startChat(t *testing.T, lanes ...*engine.Lane) (ts *httptest.Server, stop func()) {
	m := loadChat(t)
	m.mu.Lock()
	opt := Options{Model: load.TinyGoChat, Text: m.tm, Context: m.l.Config.Runtime.ContextLength,
		Vocab: m.l.Config.Architecture.VocabSize, NewSession: func() Session { return EngineSession(m.l.Model.NewSession()) },
		Generate: engine.GenerateOptions{PrefillRows: m.l.PrefillRows}, Queue: 16, Timeout: 2 * time.Minute}
	if len(lanes) > 1 {
		opt.Parallel = len(lanes)
		opt.NewLaneSession = func(i int) Session { return EngineSession(lanes[i].NewSession()) }
		opt.Generate.EOS = m.tm.StopIDs()
	}
	s, err := New(opt)
	if err != nil {
		m.mu.Unlock()
		t.Fatal(err)
	}
	ts = httptest.NewServer(s.Handler())
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ts.Close()
			s.Close()
			m.mu.Unlock()
		})
	}
	t.Cleanup(stop)
	return ts, stop
}

// toolResult is what a client case reports of a tool round trip
// (testdata/clients/*.cjs).
type toolResult struct {
	Calls []struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"calls"`
	Finishes     []string `json:"finishes"`
	Answer       string   `json:"answer"`
	PromptTokens []int    `json:"promptTokens"` // the two requests' usage.prompt_tokens, where the client shows them
	// Requests are the bodies the client sent, where it records them: the
	// model's replies are then worked out from them.
	Requests []struct {
		Messages json.RawMessage `json:"messages"`
		Tools    json.RawMessage `json:"tools"`
	} `json:"requests"`
	Error string `json:"error"`
}

// nodeClient is one npm client's case file and the packages it needs.
type nodeClient struct {
	name     string // testdata/clients/NAME.cjs
	packages []string
	// finishes are the client's names of the two steps' finish reasons.
	finishes [2]string
}

var nodeClients = []nodeClient{
	{"openai", []string{"openai"}, [2]string{"tool_calls", "stop"}},
	{"aisdk", []string{"ai", "@ai-sdk/openai-compatible", "@ai-sdk/openai", "zod"}, [2]string{"tool-calls", "stop"}},
}

// toolCases are the cases every client runs (testdata/clients/CLIENT.cjs).
var toolCases = []string{"toolRoundTrip", "toolRoundTripStream"}

// TestNodeClientsToolRoundTrip: each npm client (testdata/clients: the
// openai client and the Vercel AI SDK) asks the chat model the weather in
// Oslo with tools offered, streamed and not; the model calls get_weather
// with {"city": "Oslo"}, the client sends the tool's result back, and the
// model answers. The references are not the server's: the openai client
// sends the conversation of tiny-go-chat's HF reference (reference.json)
// to the byte, so its prompts must be as many tokens as HF's template made
// and the call and answer the engine's greedy continuations of HF's tokens
// (the engine reproduces the HF reference: e2e.CheckTinyGoChat); the AI
// SDK's requests (zod's schemas add keys to the tools) are recorded and
// rendered here with the model's template, and the call and answer must be
// the engine's greedy replies to those.
func TestNodeClientsToolRoundTrip(t *testing.T) {
	m := loadChat(t)
	ref := e2e.LoadTinyGoChatRef(t)
	header := m.tm.Encode("<|im_start|>assistant\n")
	var turns []int // where each assistant turn's text begins in the reference
	for i := 0; i+len(header) <= len(ref.Tokens); i++ {
		if reflect.DeepEqual(ref.Tokens[i:i+len(header)], header) {
			turns = append(turns, i+len(header))
		}
	}
	if len(turns) != 2 {
		t.Fatalf("the reference conversation has %d assistant turns, want 2 (the call and the answer)", len(turns))
	}
	// The model's own call and answer, from HF's tokens of the conversation.
	hfCall := parseToolCall(t, m.visible(m.greedy(t, ref.Tokens[:turns[0]], 100)))
	hfAnswer := m.visible(m.greedy(t, ref.Tokens[:turns[1]], 100))

	// The server starts after the engine ran here, and stops before it runs
	// here again (the engine's sessions share its memory): its worker sees
	// the model's buffers as this goroutine left them (the race detector
	// too).
	ts, stop := startChat(t)
	got := map[string]map[string]toolResult{}
	for i, c := range nodeClients {
		if raceEnabled && i > 0 {
			continue // -race: the first client's round trips cover the server's paths
		}
		t.Run(c.name+"/run", func(t *testing.T) {
			for _, p := range c.packages {
				needNode(t, p)
			}
			raw, err := exec.Command("node", "testdata/clients/run.cjs", c.name, ts.URL, load.TinyGoChat).Output()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, raw)
			}
			var res map[string]toolResult
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatalf("%v: %s", err, raw)
			}
			got[c.name] = res
		})
	}
	stop()

	for _, c := range nodeClients {
		res, ran := got[c.name]
		if !ran {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			for _, name := range toolCases {
				r, ok := res[name]
				switch {
				case !ok:
					t.Errorf("%s: no result", name)
					continue
				case r.Error != "":
					t.Errorf("%s: %s", name, r.Error)
					continue
				}
				call, answer := hfCall, hfAnswer
				if len(r.Requests) > 0 {
					if len(r.Requests) != 2 {
						t.Errorf("%s: %d requests, want 2 (the call, the answer)", name, len(r.Requests))
						continue
					}
					call = parseToolCall(t, m.visible(m.greedy(t, m.render(t, r.Requests[0].Messages, r.Requests[0].Tools), 100)))
					answer = m.visible(m.greedy(t, m.render(t, r.Requests[1].Messages, r.Requests[1].Tools), 100))
				}
				if len(r.Calls) != 1 || r.Calls[0].Name != call.Name || !sameJSON(r.Calls[0].Arguments, string(call.Arguments)) {
					t.Errorf("%s: calls %+v, want the model's %s(%s)", name, r.Calls, call.Name, call.Arguments)
				}
				if !reflect.DeepEqual(r.Finishes, c.finishes[:]) {
					t.Errorf("%s: finish reasons %q, want %q", name, r.Finishes, c.finishes)
				}
				if r.Answer != answer || answer == "" {
					t.Errorf("%s: answer %q, want the model's %q", name, r.Answer, answer)
				}
				if r.PromptTokens != nil && !reflect.DeepEqual(r.PromptTokens, turns) {
					t.Errorf("%s: prompts of %v tokens, HF's template renders %v", name, r.PromptTokens, turns)
				}
			}
			if a, b := res["toolRoundTrip"].Answer, res["toolRoundTripStream"].Answer; a != b {
				t.Errorf("streamed answer %q, not streamed %q: greedy, they must agree", b, a)
			}
		})
	}
	t.Logf("on HF's conversation the model calls %s(%s) and answers %q", hfCall.Name, hfCall.Arguments, hfAnswer)
}

// render is the prompt of a chat request's messages and tools, as the
// model's template renders them with the generation prompt.
func (m *chatModel) render(t *testing.T, msgs, tools json.RawMessage) []int {
	t.Helper()
	s, err := m.tm.RenderJSON(msgs, chat.Options{AddGenerationPrompt: true, Tools: tools}, false)
	if err != nil {
		t.Fatal(err)
	}
	return m.tm.EncodeRendered(s)
}

// greedy is the engine's greedy reply to prompt, up to the stop token.
func (m *chatModel) greedy(t *testing.T, prompt []int, n int) []int {
	t.Helper()
	out, err := m.l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: m.l.PrefillRows, EOS: m.tm.StopIDs()})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// visible is a reply's text without the stop token and Qwen3's empty
// think block.
func (m *chatModel) visible(out []int) string {
	if len(out) > 0 && m.tm.IsStop(out[len(out)-1]) {
		out = out[:len(out)-1]
	}
	s := m.tm.Tok.Decode(out)
	if i := strings.Index(s, "</think>"); i >= 0 {
		s = s[i+len("</think>"):]
	}
	return strings.TrimSpace(s)
}

// parseToolCall reads Qwen3's <tool_call>{json}</tool_call> from a reply.
func parseToolCall(t *testing.T, s string) (call struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}) {
	t.Helper()
	a, b := strings.Index(s, "<tool_call>"), strings.Index(s, "</tool_call>")
	if a < 0 || b < a {
		t.Fatalf("the model's reply %q holds no tool call", s)
	}
	if err := json.Unmarshal([]byte(s[a+len("<tool_call>"):b]), &call); err != nil {
		t.Fatalf("the model's tool call %q: %v", s, err)
	}
	return call
}

func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}
