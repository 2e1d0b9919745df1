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
	"unicode/utf8"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/grammar"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/text"
	"github.com/strata-llm/strata/runtime/text/chat"
	"github.com/strata-llm/strata/runtime/text/tokenizer"
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
	n            int // max_tokens
	choices      int // n
	logprobs     int // alternatives per token; -1: no logprobs
	stops        []string
	stream       bool
	includeUsage bool
	grammar      *grammar.Grammar // the reply's grammar (constrain.go); nil: free text
}

// maxChoices bounds "n" (OpenAI's limit); the choices run one after another.
const maxChoices = 128

// plan reads the sampling, length, n and logprobs fields against the
// prompt's length; topLogprobs is chat's top_logprobs (nil for
// /v1/completions, whose promptParam is "prompt"). The handlers have checked
// the model name already.
func (s *Server) plan(q *sampling, topLogprobs *int, promptLen int, promptParam string) (*plan, *apiError) {
	choices := 1
	if q.N != nil {
		if *q.N < 1 || *q.N > maxChoices {
			return nil, badRequest("n", "invalid_value", "field \"n\": expected an integer in [1, %d], got %d", maxChoices, *q.N)
		}
		choices = *q.N
	}
	logprobs, e := logprobsRequest(q.Logprobs, topLogprobs, promptParam != "prompt")
	if e != nil {
		return nil, e
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
	pl := &plan{gopt: g, n: n, choices: choices, logprobs: logprobs, stops: stops, stream: q.Stream}
	if q.StreamOptions != nil {
		if !q.Stream {
			return nil, badRequest("stream_options", "invalid_value", "field \"stream_options\": only with \"stream\": true")
		}
		pl.includeUsage = q.StreamOptions.IncludeUsage
	}
	return pl, nil
}

// result is a finished request as the responses show it: its choices and
// the prompt tokens the first one reused.
type result struct {
	choices []*choiceResult
	reused  int
	err     *apiError
}

// choiceResult is one choice's generation.
type choiceResult struct {
	out    []int
	text   string // the visible reply (control tokens and stop strings left out)
	finish string // stop, length
	// lps are the logprobs of the reply's tokens when asked for; streamed,
	// only those not sent yet (the last chunk carries them).
	lps []tokenLogprob
}

func (r *result) usage(prompt int) *usage {
	u := &usage{PromptTokens: prompt}
	for _, c := range r.choices {
		u.CompletionTokens += len(c.out)
	}
	u.TotalTokens = prompt + u.CompletionTokens
	u.PromptTokensDetails.CachedTokens = r.reused
	return u
}

// choiceSeed is choice i's sampling seed: the request's own for the first,
// then a splitmix64 mix of it and i, so the choices differ and the whole
// response follows from the one seed.
func choiceSeed(seed int64, i int) int64 {
	if i == 0 {
		return seed
	}
	z := uint64(seed) + uint64(i)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return int64(z ^ z>>31)
}

// textFunc receives a choice's visible text as it is made, with the
// logprobs of the tokens whose first byte it releases.
type textFunc func(choice int, text string, lps []tokenLogprob) error

// generate queues the prompt's choices and runs them; onStart is called
// when each starts running, onText with the visible text as it is made
// (nil: not streamed). A nil result means the client went away.
func (s *Server) generate(r *http.Request, ids []int, pl *plan, onStart func(choice int), onText textFunc) *result {
	ctx := r.Context()
	if s.opt.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opt.Timeout)
		defer cancel()
	}
	// abandon ends the choices still to run when the client is gone.
	ctx, abandon := context.WithCancel(ctx)
	defer abandon()
	var writeErr error
	jobs := make([]*job, pl.choices)
	states := make([]*choiceState, pl.choices)
	for i := range jobs {
		j := &job{ctx: ctx, prompt: ids, n: pl.n, gopt: pl.gopt, done: make(chan struct{}), splitPrompt: i < len(jobs)-1}
		j.gopt.Sampling.Seed = choiceSeed(pl.gopt.Sampling.Seed, i)
		if c := s.constraint(pl.grammar); c != nil {
			j.gopt.Constraint = c // a grammar's state is a choice's own
		}
		st := s.newChoiceState(i, pl, onText, &writeErr)
		j.token = st.token
		if pl.logprobs >= 0 {
			j.logits = st.logits
		}
		if onStart != nil {
			j.start = func() { onStart(i) }
		}
		if i > 0 {
			jobs[i-1].next = j
		}
		jobs[i], states[i] = j, st
	}
	if e := s.submit(jobs[0]); e != nil {
		return &result{err: e}
	}
	// Every choice's job is waited for before anything else is written (the
	// worker writes a stream's events); after a failure the rest are
	// abandoned. A stream whose client is gone (writeErr) stops each
	// remaining choice at its first token.
	res := &result{}
	gone := false
	for _, j := range jobs {
		<-j.done
		switch {
		case res.err != nil || gone:
		case j.cancelled && errors.Is(ctx.Err(), context.DeadlineExceeded) && r.Context().Err() == nil:
			res.err = &apiError{Status: http.StatusGatewayTimeout, Type: "timeout_error", Code: strp("timeout"),
				Message: fmt.Sprintf("the request ran past the server's time limit of %v (--timeout), its wait in the queue included", s.opt.Timeout)}
		case j.cancelled: // writeErr is the worker's until every job is done
			gone = true
		case j.err != nil:
			res.err = &apiError{Status: http.StatusInternalServerError, Type: "server_error",
				Message: fmt.Sprintf("the generation failed after %d tokens: %v", len(j.out), j.err)}
		}
		if gone || res.err != nil {
			abandon()
		}
	}
	if gone || writeErr != nil {
		return nil
	}
	res.reused = jobs[0].reused
	if res.err != nil {
		return res
	}
	for i, j := range jobs {
		res.choices = append(res.choices, states[i].finish(j.out, pl.n))
	}
	if writeErr != nil {
		return nil
	}
	return res
}

// choiceState turns one choice's tokens into its visible text: control
// tokens left out, stop strings cut, UTF-8 characters whole; with logprobs,
// it keeps each text token's entry until the text its first byte is in goes
// out.
type choiceState struct {
	index    int
	tm       *text.Model
	stop     *sample.Stopper
	utf      *tokenizer.Stream
	text     strings.Builder
	stopped  bool
	onText   textFunc
	writeErr *error
	top      int
	cur      *tokenLogprob // the entry logits made for the token token is about to get
	pending  []tokenLogprob
	pushed   int // bytes of text tokens given to the stopper
	released int // bytes the stopper let through
	runes    int // characters begun in the pushed bytes
}

func (s *Server) newChoiceState(i int, pl *plan, onText textFunc, writeErr *error) *choiceState {
	tm := s.opt.Text
	return &choiceState{index: i, tm: tm, stop: sample.NewStopper(pl.stops), utf: tm.Tok.NewStream(),
		onText: onText, writeErr: writeErr, top: pl.logprobs}
}

func (c *choiceState) control(id int) bool { return c.tm.IsStop(id) || c.tm.Tok.IsSpecial(id) }

// logits makes the logprobs entry of a text token.
func (c *choiceState) logits(id int, row []float32) {
	if !c.control(id) {
		e := logprobOf(row, id, c.top)
		c.cur = &e
	}
}

func (c *choiceState) emit(t string) {
	if t == "" || *c.writeErr != nil {
		return
	}
	c.text.WriteString(t)
	if c.onText != nil {
		k := 0
		for k < len(c.pending) && c.pending[k].start < c.released {
			k++
		}
		send := c.pending[:k:k]
		c.pending = c.pending[k:]
		*c.writeErr = c.onText(c.index, t, send)
	}
}

func (c *choiceState) token(id int) error {
	if *c.writeErr != nil {
		return engine.ErrStop // the client is gone
	}
	if c.control(id) {
		return nil
	}
	b := c.tm.Tok.TokenBytes(id)
	if c.cur != nil {
		c.cur.start, c.cur.offset = c.pushed, c.runes
		c.pending = append(c.pending, *c.cur)
		c.cur = nil
	}
	c.pushed += len(b)
	for _, x := range b {
		if utf8.RuneStart(x) {
			c.runes++
		}
	}
	out, st := c.stop.Push(b)
	c.released += len(out)
	c.emit(c.utf.PushBytes(out))
	if st {
		c.stopped = true
		return engine.ErrStop
	}
	if *c.writeErr != nil {
		return engine.ErrStop // the client is gone
	}
	return nil
}

// finish flushes the text and returns the choice's result; n is max_tokens.
func (c *choiceState) finish(out []int, n int) *choiceResult {
	if !c.stopped {
		rest := c.stop.Flush()
		c.released += len(rest)
		c.emit(c.utf.PushBytes(rest))
	}
	c.emit(c.utf.Flush())
	// Tokens that begin inside a stop string are not part of the reply.
	lps := c.pending
	for len(lps) > 0 && lps[len(lps)-1].start >= c.released && c.stopped {
		lps = lps[:len(lps)-1]
	}
	r := &choiceResult{out: out, text: c.text.String(), finish: "length", lps: lps}
	if c.stopped || len(out) > 0 && c.tm.IsStop(out[len(out)-1]) || len(out) < n {
		r.finish = "stop"
	}
	return r
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
	pl, e := s.plan(&req.sampling, req.TopLogprobs, len(ids), "messages")
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
	chunk := func(i int, d *message, finish *string, lps []tokenLogprob) chatResponse {
		c := chatChoice{Index: i, Delta: d, FinishReason: finish}
		if len(lps) > 0 || finish != nil && pl.logprobs >= 0 {
			c.Logprobs = chatLogprobsOf(tm.Tok, lps)
		}
		return chatResponse{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.opt.Model,
			SystemFingerprint: fingerprint, Choices: []chatChoice{c}}
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
		choices := make([]chatChoice, len(res.choices))
		for i, c := range res.choices {
			content, reasoning, calls := parseReply(c.text, tools, inThink, callID)
			finish := c.finish
			if len(calls) > 0 {
				finish = "tool_calls"
			}
			msg := &message{Role: "assistant", ReasoningContent: reasoning, ToolCalls: calls}
			if content != "" || len(calls) == 0 {
				msg.Content = &content
			}
			choices[i] = chatChoice{Index: i, Message: msg, FinishReason: &finish}
			if pl.logprobs >= 0 {
				choices[i].Logprobs = chatLogprobsOf(tm.Tok, c.lps)
			}
		}
		writeJSON(w, http.StatusOK, chatResponse{ID: id, Object: "chat.completion", Created: created, Model: s.opt.Model,
			SystemFingerprint: fingerprint, Choices: choices, Usage: res.usage(len(ids))})
		return
	}
	ev := &sse{w: w, timeout: s.opt.WriteTimeout}
	// Per choice: its reply parser, its tool calls so far, and the logprobs
	// of text the parser holds back (they go with its next chunk).
	parsers := make([]*replyParser, pl.choices)
	calls := make([]int, pl.choices)
	held := make([][]tokenLogprob, pl.choices)
	for i := range parsers {
		parsers[i] = newReplyParser(tools, inThink, callID)
	}
	sendParts := func(i int, parts []part, lps []tokenLogprob) error {
		held[i] = append(held[i], lps...)
		for _, p := range parts {
			d := &message{}
			switch p.kind {
			case partContent:
				d.Content = &p.text
			case partReasoning:
				d.ReasoningContent = p.text
			case partToolCall:
				d.ToolCalls = []toolCall{*p.call}
				calls[i]++
			}
			if err := ev.send(chunk(i, d, nil, held[i])); err != nil {
				return err
			}
			held[i] = nil
		}
		return nil
	}
	empty := ""
	start := func(i int) { ev.send(chunk(i, &message{Role: "assistant", Content: &empty}, nil, nil)) }
	res := s.generate(r, ids, pl, start, func(i int, t string, lps []tokenLogprob) error {
		return sendParts(i, parsers[i].push(t), lps)
	})
	if res == nil {
		return
	}
	if res.err != nil {
		ev.fail(res.err)
		return
	}
	for i, c := range res.choices {
		if err := sendParts(i, parsers[i].flush(), nil); err != nil {
			return
		}
		finish := c.finish
		if calls[i] > 0 {
			finish = "tool_calls"
		}
		if err := ev.send(chunk(i, &message{}, &finish, append(held[i], c.lps...))); err != nil {
			return
		}
	}
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
	pl, e := s.plan(&req.sampling, nil, len(ids), "prompt")
	if e != nil {
		writeError(w, e)
		return
	}
	if pl.grammar, e = textGrammar(&req.sampling); e != nil {
		writeError(w, e)
		return
	}
	id, created := newID("cmpl-"), time.Now().Unix()
	tok := s.opt.Text.Tok
	choice := func(i int, text string, finish *string, lps []tokenLogprob) textChoice {
		c := textChoice{Index: i, Text: text, FinishReason: finish}
		if len(lps) > 0 || finish != nil && pl.logprobs >= 0 {
			c.Logprobs = textLogprobsOf(tok, lps)
		}
		return c
	}
	resp := func(choices []textChoice, u *usage) textResponse {
		return textResponse{ID: id, Object: "text_completion", Created: created, Model: s.opt.Model,
			SystemFingerprint: fingerprint, Choices: choices, Usage: u}
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
		choices := make([]textChoice, len(res.choices))
		for i, c := range res.choices {
			choices[i] = choice(i, c.text, &c.finish, c.lps)
		}
		writeJSON(w, http.StatusOK, resp(choices, res.usage(len(ids))))
		return
	}
	ev := &sse{w: w, timeout: s.opt.WriteTimeout}
	res := s.generate(r, ids, pl, func(int) { ev.begin() }, func(i int, t string, lps []tokenLogprob) error {
		return ev.send(resp([]textChoice{choice(i, t, nil, lps)}, nil))
	})
	if res == nil {
		return
	}
	if res.err != nil {
		ev.fail(res.err)
		return
	}
	for i, c := range res.choices {
		if err := ev.send(resp([]textChoice{choice(i, "", &c.finish, c.lps)}, nil)); err != nil {
			return
		}
	}
	if pl.includeUsage {
		ev.send(resp([]textChoice{}, res.usage(len(ids))))
	}
	ev.done()
}
