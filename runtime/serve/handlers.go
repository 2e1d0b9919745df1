package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/grammar"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/text/chat"
)

func jsonMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// plan is a request's generation settings, checked.
type plan struct {
	gopt         engine.GenerateOptions
	n            int
	stops        []string
	stream       bool
	includeUsage bool
	grammar      *grammar.Grammar // the reply's grammar (constrain.go); nil: free text
}

// plan reads the sampling and length fields against the prompt's length.
// The handlers have checked the model name already.
func (s *Server) plan(q *sampling, promptLen int, promptParam string) (*plan, *apiError) {
	if q.N != nil && *q.N != 1 {
		return nil, badRequest("n", "unsupported_value", "field \"n\": this server makes one choice per request, got n = %d", *q.N)
	}
	if len(q.Logprobs) > 0 && string(q.Logprobs) != "false" && string(q.Logprobs) != "null" {
		return nil, badRequest("logprobs", "unsupported_value", "field \"logprobs\": log probabilities are not supported")
	}
	p := s.opt.Generate.Sampling
	setF := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	setF(&p.Temperature, q.Temperature)
	setF(&p.TopP, q.TopP)
	setF(&p.MinP, q.MinP)
	setF(&p.RepeatPenalty, q.RepeatPenalty)
	setF(&p.PresencePenalty, q.PresencePenalty)
	setF(&p.FrequencyPenalty, q.FrequencyPenalty)
	if q.TopK != nil {
		p.TopK = *q.TopK
	}
	if q.Seed != nil {
		p.Seed = *q.Seed
	} else if s.opt.RandomSeed {
		p.Seed = rand.Int64()
	}
	switch {
	case p.Temperature < 0 || p.Temperature > 2:
		return nil, badRequest("temperature", "invalid_value", "field \"temperature\": expected a number in [0, 2], got %g", p.Temperature)
	case q.TopP != nil && (*q.TopP <= 0 || *q.TopP > 1):
		return nil, badRequest("top_p", "invalid_value", "field \"top_p\": expected a number in (0, 1], got %g", *q.TopP)
	case q.TopK != nil && *q.TopK < 0:
		return nil, badRequest("top_k", "invalid_value", "field \"top_k\": expected an integer ≥ 0 (0: off), got %d", *q.TopK)
	case q.MinP != nil && (*q.MinP < 0 || *q.MinP > 1):
		return nil, badRequest("min_p", "invalid_value", "field \"min_p\": expected a number in [0, 1], got %g", *q.MinP)
	case q.RepeatPenalty != nil && *q.RepeatPenalty <= 0:
		return nil, badRequest("repeat_penalty", "invalid_value", "field \"repeat_penalty\": expected a number > 0 (1: off), got %g", *q.RepeatPenalty)
	case p.PresencePenalty < -2 || p.PresencePenalty > 2:
		return nil, badRequest("presence_penalty", "invalid_value", "field \"presence_penalty\": expected a number in [-2, 2], got %g", p.PresencePenalty)
	case p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2:
		return nil, badRequest("frequency_penalty", "invalid_value", "field \"frequency_penalty\": expected a number in [-2, 2], got %g", p.FrequencyPenalty)
	}
	if err := p.Validate(); err != nil {
		return nil, badRequest("", "invalid_value", "sampling: %v", err)
	}
	room := s.opt.Context - promptLen
	if room < 1 {
		return nil, badRequest(promptParam, "context_length_exceeded",
			"the prompt is %d tokens, but the model's context is %d tokens, which must hold the prompt and at least one generated token", promptLen, s.opt.Context)
	}
	n := s.opt.MaxTokens
	for _, f := range []struct {
		name string
		v    *int
	}{{"max_tokens", q.MaxTokens}, {"max_completion_tokens", q.MaxCompletionTokens}} {
		if f.v == nil {
			continue
		}
		if *f.v < 1 {
			return nil, badRequest(f.name, "invalid_value", "field %q: expected an integer ≥ 1, got %d", f.name, *f.v)
		}
		n = *f.v
	}
	if n == 0 || n > room {
		n = room // the rest of the context
	}
	stops, e := stopStrings(q.Stop)
	if e != nil {
		return nil, e
	}
	stops = append(stops, s.opt.Stop...)
	g := s.opt.Generate
	g.Sampling = p
	if q.IgnoreEOS != nil {
		g.IgnoreEOS = *q.IgnoreEOS
	}
	pl := &plan{gopt: g, n: n, stops: stops, stream: q.Stream}
	if q.StreamOptions != nil {
		if !q.Stream {
			return nil, badRequest("stream_options", "invalid_value", "field \"stream_options\": only with \"stream\": true")
		}
		pl.includeUsage = q.StreamOptions.IncludeUsage
	}
	return pl, nil
}

// result is a finished generation as the responses show it.
type result struct {
	out    []int
	reused int
	text   string // the visible reply (control tokens and stop strings left out)
	finish string // stop, length
	err    *apiError
}

func (r *result) usage(prompt int) *usage {
	u := &usage{PromptTokens: prompt, CompletionTokens: len(r.out), TotalTokens: prompt + len(r.out)}
	u.PromptTokensDetails.CachedTokens = r.reused
	return u
}

// generate queues the prompt and runs it; onStart is called when it starts
// running, onText with the visible text as it is made (nil: not streamed).
// A nil result means the client went away.
func (s *Server) generate(r *http.Request, ids []int, pl *plan, onStart func(), onText func(string) error) *result {
	ctx := r.Context()
	if s.opt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opt.Timeout)
		defer cancel()
	}
	tm := s.opt.Text
	stop := sample.NewStopper(pl.stops)
	utf := tm.Tok.NewStream()
	var text strings.Builder
	stopped := false
	var writeErr error
	emit := func(t string) {
		if t == "" || writeErr != nil {
			return
		}
		text.WriteString(t)
		if onText != nil {
			writeErr = onText(t)
		}
	}
	gopt := pl.gopt
	if c := s.constraint(pl.grammar); c != nil {
		gopt.Constraint = c
	}
	j := &job{ctx: ctx, prompt: ids, n: pl.n, gopt: gopt, start: onStart, done: make(chan struct{})}
	j.token = func(id int) error {
		if tm.IsStop(id) || tm.Tok.IsSpecial(id) {
			return nil
		}
		b, st := stop.Push(tm.Tok.TokenBytes(id))
		emit(utf.PushBytes(b))
		if st {
			stopped = true
			return engine.ErrStop
		}
		if writeErr != nil {
			return engine.ErrStop // the client is gone
		}
		return nil
	}
	if e := s.submit(j); e != nil {
		return &result{err: e}
	}
	<-j.done
	res := &result{out: j.out, reused: j.reused}
	switch {
	case j.cancelled && errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil:
		res.err = &apiError{Status: http.StatusGatewayTimeout, Type: "timeout_error", Code: strp("timeout"),
			Message: fmt.Sprintf("the request ran past the server's time limit of %v (--timeout), its wait in the queue included", s.opt.Timeout)}
		return res
	case j.cancelled || writeErr != nil:
		return nil
	case j.err != nil:
		res.err = &apiError{Status: http.StatusInternalServerError, Type: "server_error",
			Message: fmt.Sprintf("the generation failed after %d tokens: %v", len(j.out), j.err)}
		return res
	}
	if !stopped {
		emit(utf.PushBytes(stop.Flush()))
	}
	emit(utf.Flush())
	res.text = text.String()
	res.finish = "length"
	if stopped || len(j.out) > 0 && tm.IsStop(j.out[len(j.out)-1]) || len(j.out) < pl.n {
		res.finish = "stop"
	}
	return res
}

// sse writes server-sent events. Each write has a deadline: the engine
// writes the tokens as it makes them, so a client that stops reading must
// not hold it.
type sse struct {
	w       http.ResponseWriter
	timeout time.Duration
	started bool
}

func (e *sse) begin() {
	if e.started {
		return
	}
	e.started = true
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
}

func (e *sse) send(v any) error {
	e.begin()
	data, err := jsonMarshal(v)
	if err != nil {
		return err
	}
	rc := http.NewResponseController(e.w)
	if e.timeout > 0 {
		rc.SetWriteDeadline(time.Now().Add(e.timeout))
	}
	if _, err := fmt.Fprintf(e.w, "data: %s\n\n", data); err != nil {
		return err
	}
	return rc.Flush()
}

func (e *sse) done() {
	e.begin()
	fmt.Fprint(e.w, "data: [DONE]\n\n")
	http.NewResponseController(e.w).Flush()
}

// fail ends a stream with the error object (or answers with it, Retry-After
// on a 503, when the stream has not started).
func (e *sse) fail(err *apiError) {
	if !e.started {
		writeErrorRetry(e.w, err)
		return
	}
	e.send(map[string]*apiError{"error": err})
	e.done()
}

// normalizeMessages checks the messages and turns content given as an array
// of text parts into a string, as the chat template expects.
func normalizeMessages(raw json.RawMessage) (json.RawMessage, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("messages", "missing_field", "field \"messages\" is required: an array of {\"role\", \"content\"} objects")
	}
	var msgs []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, badRequest("messages", "invalid_type", "field \"messages\": expected an array of message objects")
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages", "invalid_value", "field \"messages\" is empty: give at least one message")
	}
	for i, m := range msgs {
		param := fmt.Sprintf("messages[%d]", i)
		var role string
		if err := json.Unmarshal(m["role"], &role); err != nil || role == "" {
			return nil, badRequest(param+".role", "invalid_value", "field %q: expected a role string (system, user, assistant, tool)", param+".role")
		}
		c, ok := m["content"]
		if !ok || string(c) == "null" {
			continue
		}
		var str string
		if json.Unmarshal(c, &str) == nil {
			continue
		}
		var parts []struct {
			Type string  `json:"type"`
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			return nil, badRequest(param+".content", "invalid_type", "field %q: expected a string or an array of content parts", param+".content")
		}
		var b strings.Builder
		for k, p := range parts {
			if p.Type != "text" || p.Text == nil {
				return nil, badRequest(fmt.Sprintf("%s.content[%d]", param, k), "unsupported_value",
					"field %q: only text parts ({\"type\": \"text\", \"text\": ...}) are supported, got type %q", fmt.Sprintf("%s.content[%d]", param, k), p.Type)
			}
			b.WriteString(*p.Text)
		}
		m["content"], _ = json.Marshal(b.String())
	}
	out, err := json.Marshal(msgs)
	if err != nil {
		return nil, badRequest("messages", "invalid_value", "field \"messages\": %v", err)
	}
	return out, nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.opt.MaxBody)
	var req chatRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	tm := s.opt.Text
	if tm.Template == nil {
		writeError(w, badRequest("messages", "no_chat_template", "the model has no chat template; use /v1/completions with a prompt"))
		return
	}
	msgs, e := normalizeMessages(req.Messages)
	if e != nil {
		writeError(w, e)
		return
	}
	copt := chat.Options{AddGenerationPrompt: true}
	tools := len(bytes.TrimSpace(req.Tools)) > 0 && string(bytes.TrimSpace(req.Tools)) != "null"
	if tools {
		var list []json.RawMessage
		if json.Unmarshal(req.Tools, &list) != nil {
			writeError(w, badRequest("tools", "invalid_type", "field \"tools\": expected an array of tool objects"))
			return
		}
		var choice string
		if len(req.ToolChoice) > 0 && json.Unmarshal(req.ToolChoice, &choice) == nil && choice == "none" {
			tools = false
		} else if len(list) > 0 {
			copt.Tools = req.Tools
		} else {
			tools = false
		}
	}
	if think := req.ChatTemplateKwargs.EnableThinking; think != nil {
		copt.EnableThinking = think
	} else if s.opt.NoThink {
		no := false
		copt.EnableThinking = &no
	}
	special := s.opt.ParseSpecial
	if req.ParseSpecial != nil {
		special = *req.ParseSpecial
	}
	rendered, err := tm.RenderJSON(msgs, copt, special)
	if err != nil {
		writeError(w, badRequest("messages", "invalid_value", "rendering the chat template: %v", err))
		return
	}
	ids := tm.EncodeRendered(rendered)
	pl, e := s.plan(&req.sampling, len(ids), "messages")
	if e != nil {
		writeError(w, e)
		return
	}
	inThink := strings.HasSuffix(strings.TrimRight(rendered, " \n"), thinkOpen)
	if pl.grammar, e = s.chatGrammar(&req, tools, rendered); e != nil {
		writeError(w, e)
		return
	}
	id, created := newID("chatcmpl-"), time.Now().Unix()
	chunk := func(d *message, finish *string) chatResponse {
		return chatResponse{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.Model,
			SystemFingerprint: fingerprint, Choices: []chatChoice{{Delta: d, FinishReason: finish}}}
	}
	callID := func() string { return newID("call_") }
	if !pl.stream {
		res := s.generate(r, ids, pl, nil, nil)
		if res == nil {
			return
		}
		if res.err != nil {
			writeErrorRetry(w, res.err)
			return
		}
		content, reasoning, calls := parseReply(res.text, tools, inThink, callID)
		finish := res.finish
		if len(calls) > 0 {
			finish = "tool_calls"
		}
		msg := &message{Role: "assistant", ReasoningContent: reasoning, ToolCalls: calls}
		if content != "" || len(calls) == 0 {
			msg.Content = &content
		}
		writeJSON(w, http.StatusOK, chatResponse{ID: id, Object: "chat.completion", Created: created, Model: s.opt.Model,
			SystemFingerprint: fingerprint, Choices: []chatChoice{{Message: msg, FinishReason: &finish}}, Usage: res.usage(len(ids))})
		return
	}
	ev := &sse{w: w, timeout: s.opt.WriteTimeout}
	parser := newReplyParser(tools, inThink, callID)
	calls := 0
	sendParts := func(parts []part) error {
		for _, p := range parts {
			d := &message{}
			switch p.kind {
			case partContent:
				d.Content = &p.text
			case partReasoning:
				d.ReasoningContent = p.text
			case partToolCall:
				d.ToolCalls = []toolCall{*p.call}
				calls++
			}
			if err := ev.send(chunk(d, nil)); err != nil {
				return err
			}
		}
		return nil
	}
	empty := ""
	start := func() { ev.send(chunk(&message{Role: "assistant", Content: &empty}, nil)) }
	res := s.generate(r, ids, pl, start, func(t string) error { return sendParts(parser.push(t)) })
	if res == nil {
		return
	}
	if res.err != nil {
		ev.fail(res.err)
		return
	}
	if err := sendParts(parser.flush()); err != nil {
		return
	}
	finish := res.finish
	if calls > 0 {
		finish = "tool_calls"
	}
	ev.send(chunk(&message{}, &finish))
	if pl.includeUsage {
		ev.send(chatResponse{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.Model,
			SystemFingerprint: fingerprint, Choices: []chatChoice{}, Usage: res.usage(len(ids))})
	}
	ev.done()
}

// fingerprint names the server build in responses.
const fingerprint = "strata"

// writeErrorRetry writes an error, with Retry-After on a 503.
func writeErrorRetry(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeError(w, e)
}

// promptIDs reads /v1/completions' prompt: a string, one string in an
// array, or an array of token ids.
func (s *Server) promptIDs(raw json.RawMessage) ([]int, *apiError) {
	var str string
	if json.Unmarshal(raw, &str) == nil {
		if str == "" {
			return nil, badRequest("prompt", "invalid_value", "field \"prompt\" is empty")
		}
		return s.opt.Text.Encode(str), nil
	}
	var strs []string
	if json.Unmarshal(raw, &strs) == nil {
		if len(strs) != 1 {
			return nil, badRequest("prompt", "unsupported_value", "field \"prompt\": one prompt per request, got %d", len(strs))
		}
		return s.promptIDs(json.RawMessage(mustJSON(strs[0])))
	}
	var ids []int
	if err := json.Unmarshal(raw, &ids); err != nil || len(raw) == 0 {
		return nil, badRequest("prompt", "invalid_type", "field \"prompt\": expected a string or an array of token ids")
	}
	if len(ids) == 0 {
		return nil, badRequest("prompt", "invalid_value", "field \"prompt\" is empty")
	}
	for i, id := range ids {
		if id < 0 || id >= s.opt.Vocab {
			return nil, badRequest("prompt", "invalid_value", "field \"prompt\": token %d (item %d) is outside the model's vocabulary of %d ids", id, i, s.opt.Vocab)
		}
	}
	return ids, nil
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, s.opt.MaxBody)
	var req completionRequest
	if e := decodeBody(r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	ids, e := s.promptIDs(req.Prompt)
	if e != nil {
		writeError(w, e)
		return
	}
	pl, e := s.plan(&req.sampling, len(ids), "prompt")
	if e != nil {
		writeError(w, e)
		return
	}
	if pl.grammar, e = textGrammar(&req.sampling); e != nil {
		writeError(w, e)
		return
	}
	id, created := newID("cmpl-"), time.Now().Unix()
	resp := func(text string, finish *string, u *usage) textResponse {
		t := textResponse{ID: id, Object: "text_completion", Created: created, Model: s.opt.Model,
			SystemFingerprint: fingerprint, Choices: []textChoice{{Text: text, FinishReason: finish}}, Usage: u}
		if finish == nil && u != nil {
			t.Choices = []textChoice{}
		}
		return t
	}
	if !pl.stream {
		res := s.generate(r, ids, pl, nil, nil)
		if res == nil {
			return
		}
		if res.err != nil {
			writeErrorRetry(w, res.err)
			return
		}
		writeJSON(w, http.StatusOK, resp(res.text, &res.finish, res.usage(len(ids))))
		return
	}
	ev := &sse{w: w, timeout: s.opt.WriteTimeout}
	res := s.generate(r, ids, pl, ev.begin, func(t string) error { return ev.send(resp(t, nil, nil)) })
	if res == nil {
		return
	}
	if res.err != nil {
		ev.fail(res.err)
		return
	}
	ev.send(resp("", &res.finish, nil))
	if pl.includeUsage {
		ev.send(resp("", nil, res.usage(len(ids))))
	}
	ev.done()
}
