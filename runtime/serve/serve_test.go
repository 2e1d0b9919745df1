package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/chat"
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
