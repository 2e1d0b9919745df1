package serve

import (
	"encoding/json"
	"os"
	"os/exec"
	"testing"

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
