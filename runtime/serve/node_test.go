package serve

import (
	"cmp"
	"encoding/json"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"testing"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/text/chat"
)

// TestOpenAINodeClient drives the server with the official openai npm
// client (testdata/openai_client.cjs): chat streamed and not, completions,
// the model list, a tool call and its round trip, streamed tool calls, and
// errors as the client's typed exceptions. It needs node with the openai
// package on NODE_PATH (npm install openai@4; docs/serve.md) and is skipped
// without them.
func TestOpenAINodeClient(t *testing.T) {
	needNode(t, "openai")
	m := loadReal(t)
	msgs := []chat.Message{{Role: "user", Content: "Hello there"}}
	rendered, err := m.tm.Template.Render(msgs, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	prompt := m.tm.Tok.Encode(rendered)
	chatOut := m.greedy(t, prompt, 8)
	hello := m.tm.Encode("Hello")
	cmplOut := m.greedy(t, hello, 4)
	tool := startFake(t, toolReply, 0, nil, nil)
	ts, _ := startReal(t, nil)
	cmd := exec.Command("node", "testdata/openai_client.cjs", ts.URL, tool.ts.URL)
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, raw)
	}
	type usageJS struct {
		Prompt     int `json:"prompt_tokens"`
		Completion int `json:"completion_tokens"`
		Total      int `json:"total_tokens"`
	}
	type callJS struct {
		Index    *int
		ID, Type string
		Function struct{ Name, Arguments string }
	}
	var got struct {
		Chat struct {
			Object, Role, Content, Finish string
			Usage                         usageJS
		}
		Stream struct {
			Content, Finish string
			Usage           *usageJS
		}
		Completion struct {
			Object, Text string
			Usage        usageJS
		}
		Models []string
		Tool   struct {
			Finish, Reasoning, Content string
			Calls                      []callJS
		}
		RoundTrip     string
		StreamedCalls []callJS
		Errors        map[string]struct {
			Status            int
			Code, Param, Type string
		}
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	wantChat := usageJS{len(prompt), len(chatOut), len(prompt) + len(chatOut)}
	if c := got.Chat; c.Object != "chat.completion" || c.Role != "assistant" || c.Content != m.visible(chatOut) || c.Usage != wantChat || c.Finish != finishOf(m, chatOut, 8) {
		t.Errorf("chat: %+v; want %q, usage %+v", c, m.visible(chatOut), wantChat)
	}
	if s := got.Stream; s.Content != m.visible(chatOut) || s.Usage == nil || *s.Usage != wantChat || s.Finish != finishOf(m, chatOut, 8) {
		t.Errorf("stream: %+v", s)
	}
	if c := got.Completion; c.Object != "text_completion" || c.Text != m.visible(cmplOut) || c.Usage.Prompt != len(hello) || c.Usage.Completion != len(cmplOut) {
		t.Errorf("completion: %+v; want %q", c, m.visible(cmplOut))
	}
	if len(got.Models) != 1 || got.Models[0] != "tiny" {
		t.Errorf("models %v", got.Models)
	}
	tc := got.Tool
	if tc.Finish != "tool_calls" || tc.Reasoning != "The user wants weather." || tc.Content != "Let me look." || len(tc.Calls) != 1 ||
		tc.Calls[0].Function.Name != "get_weather" || tc.Calls[0].Function.Arguments != `{"city":"Paris","unit":"c"}` || tc.Calls[0].Type != "function" {
		t.Errorf("tool call: %+v", tc)
	}
	if got.RoundTrip != "tool_calls" {
		t.Errorf("round trip finish %q", got.RoundTrip)
	}
	if sc := got.StreamedCalls; len(sc) != 1 || sc[0].Index == nil || *sc[0].Index != 0 || sc[0].Function.Arguments != `{"city":"Paris","unit":"c"}` {
		t.Errorf("streamed calls %+v", sc)
	}
	if e := got.Errors["unknownModel"]; e.Status != 404 || e.Code != "model_not_found" {
		t.Errorf("unknown model: %+v", e)
	}
	if e := got.Errors["badValue"]; e.Status != 400 || e.Param != "temperature" || e.Type != "invalid_request_error" {
		t.Errorf("bad value: %+v", e)
	}
}

// needNode skips the test unless node can load the npm package pkg (from
// NODE_PATH); with STRATA_REQUIRE_NODE=1 (CI, after installing them) it
// fails instead.
func needNode(t *testing.T, pkg string) {
	t.Helper()
	why := ""
	if _, err := exec.LookPath("node"); err != nil {
		why = "no node on PATH"
	} else if err := exec.Command("node", "-e", `require("`+pkg+`")`).Run(); err != nil {
		why = "the " + pkg + " npm package is not on NODE_PATH"
	}
	if why == "" {
		return
	}
	if os.Getenv("STRATA_REQUIRE_NODE") == "1" {
		t.Fatal(why + ", with STRATA_REQUIRE_NODE=1")
	}
	t.Skip(why)
}

// TestOpenAINodeClientFields: the openai npm client with an API key asks for
// three seeded sampled choices with logprobs, streamed and not
// (testdata/openai_fields.cjs): each choice is the engine's own sample with
// its seed, the streamed response equals the other one token for token,
// the logprob entries' bytes are the reply's, each top 3 sorted;
// /v1/completions' legacy logprobs and ignore_eos pass through the client;
// a wrong key is the client's AuthenticationError.
func TestOpenAINodeClientFields(t *testing.T) {
	needNode(t, "openai")
	m := loadReal(t)
	rendered, err := m.tm.Template.Render([]chat.Message{{Role: "user", Content: "Hello there"}}, chat.Options{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	prompt := m.tm.Tok.Encode(rendered)
	var want []string
	var wantBytes [][]int // the reply's raw bytes (a token may be part of a character)
	total := 0
	for i := range 3 {
		out, err := m.l.Model.NewSession().Generate(prompt, 6, engine.GenerateOptions{PrefillRows: m.l.PrefillRows, EOS: m.tm.StopIDs(),
			Sampling: sample.Params{Temperature: 0.8, Seed: choiceSeed(5, i)}})
		if err != nil {
			t.Fatal(err)
		}
		want, total = append(want, m.visible(out)), total+len(out)
		var b []int
		for _, id := range out {
			if !m.tm.IsStop(id) && !m.tm.Tok.IsSpecial(id) {
				for _, c := range m.tm.Tok.TokenBytes(id) {
					b = append(b, int(c))
				}
			}
		}
		wantBytes = append(wantBytes, b)
	}
	const key = "sk-node-client"
	ts, _ := startReal(t, func(o *Options) { o.APIKeys = []string{key} })
	raw, err := exec.Command("node", "testdata/openai_fields.cjs", ts.URL, key).Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, raw)
	}
	type entry struct {
		Token       string
		Logprob     float64
		Bytes       []int
		TopLogprobs []struct {
			Token   string
			Logprob float64
		} `json:"top_logprobs"`
	}
	type choice struct {
		Index    int
		Content  string
		Logprobs []entry
	}
	var got struct {
		Chat, Stream []choice
		ChatUsage    usage
		Completion   struct {
			Text     string
			Logprobs struct {
				Tokens        []string
				TokenLogprobs []float64            `json:"token_logprobs"`
				TopLogprobs   []map[string]float64 `json:"top_logprobs"`
				TextOffset    []int                `json:"text_offset"`
			}
			Usage usage
		}
		WrongKey struct {
			Name, Code string
			Status     int
		}
	}
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	if len(got.Chat) != 3 || got.ChatUsage.CompletionTokens != total {
		t.Fatalf("chat: %s; want 3 choices, %d tokens", raw, total)
	}
	for i, c := range got.Chat {
		if c.Index != i || c.Content != want[i] {
			t.Errorf("choice %d: %q, the engine sampled %q with seed %d", i, c.Content, want[i], choiceSeed(5, i))
		}
		var b []int
		for _, e := range c.Logprobs {
			b = append(b, e.Bytes...)
			if e.Logprob > 0 || len(e.TopLogprobs) != 3 ||
				!slices.IsSortedFunc(e.TopLogprobs, func(a, b struct {
					Token   string
					Logprob float64
				}) int {
					return cmp.Compare(b.Logprob, a.Logprob)
				}) || e.Logprob > e.TopLogprobs[0].Logprob {
				t.Errorf("choice %d: entry %+v", i, e)
			}
		}
		if !slices.Equal(b, wantBytes[i]) {
			t.Errorf("choice %d: the logprobs' tokens make the bytes %v, the engine's reply %v", i, b, wantBytes[i])
		}
		if s := got.Stream; len(s) != 3 || s[i].Content != c.Content || !reflect.DeepEqual(s[i].Logprobs, c.Logprobs) {
			t.Errorf("choice %d streamed: %+v, not streamed %+v", i, s, c)
		}
	}
	cm := got.Completion
	if lp := cm.Logprobs; cm.Usage.CompletionTokens != 5 || len(lp.Tokens) != 5 ||
		len(lp.TokenLogprobs) != 5 || len(lp.TopLogprobs) != 5 || len(lp.TextOffset) != 5 || lp.TextOffset[0] != 0 {
		t.Errorf("completion: %+v", cm)
	}
	if w := got.WrongKey; w.Name != "AuthenticationError" || w.Status != 401 || w.Code != "invalid_api_key" {
		t.Errorf("a wrong key: %+v", w)
	}
}
