// Package serve is strata's OpenAI-compatible HTTP server: chat and text
// completions (streamed as server-sent events or not), the model list,
// health and Prometheus metrics, over engine sessions fed from a bounded
// queue: one request at a time, or with Options.Parallel several, each on a
// lane of its own state, taking turns window by window. Each lane keeps its
// last conversation's state so a chat turn prefills only its new tokens.
package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/grammar"
	"github.com/strata-llm/strata/runtime/text"
)

// Session is what the server needs of an engine session (*engine.Session).
type Session interface {
	Pos() int
	Generate(prompt []int, n int, opt engine.GenerateOptions) ([]int, error)
}

// Options configure a Server.
type Options struct {
	// Model is the id /v1/models lists; requests naming another get 404
	// (an empty "model" is this one).
	Model string
	// Text is the model's tokenizer, chat template and stop ids.
	Text *text.Model
	// NewSession starts a fresh sequence (clearing the model state).
	NewSession func() Session
	// Parallel is how many requests run at once (0 or 1: one). Each runs
	// on a lane of its own sequence state (NewLaneSession(i) starts a fresh
	// sequence on lane i, 0 ≤ i < Parallel, clearing only that lane's
	// state); the engine takes turns between them window by window
	// (engine.GenerateOptions.Turn). With Parallel ≤ 1 NewSession serves.
	Parallel       int
	NewLaneSession func(lane int) Session
	// Context is the session's context length in tokens; Vocab the model's
	// vocabulary size (token-id prompts are checked against it).
	Context, Vocab int
	// Generate holds the defaults every request starts from: prefill rows,
	// speculation, the EOS ids, and the sampling chain a request's fields
	// override.
	Generate engine.GenerateOptions
	// RandomSeed draws a fresh seed for each sampled request that gives no
	// "seed" (as OpenAI's API does); otherwise Generate.Sampling.Seed is
	// every such request's.
	RandomSeed bool
	// MaxTokens is the reply length when a request gives none (0: up to the
	// end of the context).
	MaxTokens int
	// Queue is how many requests may wait behind the running ones; more
	// get 503 with Retry-After.
	Queue int
	// Timeout bounds a request, its wait in the queue included (0: none).
	Timeout time.Duration
	// WriteTimeout bounds each write of a stream: a client that stops
	// reading for longer loses its stream, and the engine moves on (0: 30 s;
	// negative: none).
	WriteTimeout time.Duration
	// MaxBody is the largest request body in bytes.
	MaxBody int64
	// Stop are stop strings every request has besides its own.
	Stop []string
	// NoThink renders chat templates with enable_thinking=false unless a
	// request's chat_template_kwargs says otherwise.
	NoThink bool
	// ParseSpecial lets special-token text in chat messages become control
	// tokens unless a request's parse_special says otherwise; off, a client
	// cannot write a turn of its own (<|im_end|><|im_start|>system …).
	ParseSpecial bool
	// NoReuse turns prefix reuse off: every request prefills its whole
	// prompt on a fresh session.
	NoReuse bool
	// CacheBytes > 0 keeps copies of the session state of conversations the
	// server switches away from (sessions that are Savers), up to this many
	// bytes, least recently used evicted first: a conversation that comes
	// back resumes from its copy instead of prefilling again.
	CacheBytes int64
	// APIKeys, when any, are the keys a request must carry (Authorization:
	// Bearer KEY, or x-api-key: KEY) on every route but /health and the chat
	// page; others get 401 invalid_api_key.
	APIKeys []string
	// CORSOrigins are the browser origins allowed to call the API ("*":
	// any): preflights are answered and every response to them carries the
	// CORS headers. None: no CORS headers.
	CORSOrigins []string
	// EngineStats, when set, is read after each request for /metrics.
	EngineStats func() EngineStats
	// Logf logs recovered panics and failed generations (nil: silent).
	Logf func(format string, args ...any)
}

// EngineStats are the engine's own counters /metrics shows.
type EngineStats struct {
	// Streaming says the routed experts stream through an arena;
	// ExpertHits/Misses count its lookups.
	Streaming                bool
	ExpertHits, ExpertMisses int
	// Spec says speculation is on; Drafted/Accepted count drafts.
	Spec              bool
	Drafted, Accepted int
}

// Server answers the API. Create it with New, serve Handler, and Close it
// after the HTTP server has shut down.
type Server struct {
	opt     Options
	mux     *http.ServeMux
	created int64
	m       metrics

	acc *access

	qmu    sync.Mutex
	queue  chan *job
	closed bool
	done   chan struct{} // closed when the worker has stopped

	// lanes run the jobs; lmu guards their busy and used fields, idle
	// is signalled when one frees.
	lanes []*lane
	lmu   sync.Mutex
	idle  *sync.Cond
	clock uint64
	// turns grants the model to one job at a time; what it guards: the
	// sessions, the lanes' kept tokens and marks, the state cache and the
	// engine's counters.
	turns turns
	cache *stateCache

	vocabOnce    sync.Once
	grammarVocab *grammar.Vocab // the tokenizer's ids as grammar tries (constrain.go)
}

// lane is one sequence the server runs requests on: its session, the
// tokens it has consumed and its turn boundaries.
type lane struct {
	id         int
	newSession func() Session
	sess       Session
	kept       []int
	marks      []mark // the live session's turn boundaries, oldest first
	busy       bool   // Server.lmu
	used       uint64 // Server.lmu: when it last took a job
}

// New checks the options and starts the worker.
func New(opt Options) (*Server, error) {
	switch {
	case opt.Text == nil:
		return nil, errors.New("serve: the model has no tokenizer, which the server needs")
	case opt.NewSession == nil && opt.Parallel <= 1:
		return nil, errors.New("serve: no session constructor")
	case opt.Parallel > 1 && opt.NewLaneSession == nil:
		return nil, fmt.Errorf("serve: %d parallel sequences need a lane session constructor", opt.Parallel)
	case opt.Context < 2:
		return nil, fmt.Errorf("serve: context length %d: expected ≥ 2", opt.Context)
	case opt.Queue < 0:
		return nil, fmt.Errorf("serve: queue length %d: expected ≥ 0", opt.Queue)
	case opt.Generate.PrefillRows < 1:
		return nil, fmt.Errorf("serve: prefill rows %d: expected ≥ 1", opt.Generate.PrefillRows)
	}
	if opt.Model == "" {
		opt.Model = "strata"
	}
	if opt.WriteTimeout == 0 {
		opt.WriteTimeout = 30 * time.Second
	}
	if opt.MaxBody <= 0 {
		opt.MaxBody = 8 << 20
	}
	if opt.Vocab <= 0 {
		opt.Vocab = opt.Text.Tok.Vocab()
	}
	for _, id := range opt.Text.StopIDs() {
		if !slices.Contains(opt.Generate.EOS, id) {
			opt.Generate.EOS = append(opt.Generate.EOS, id)
		}
	}
	acc, err := newAccess(opt.APIKeys, opt.CORSOrigins)
	if err != nil {
		return nil, err
	}
	s := &Server{opt: opt, mux: http.NewServeMux(), created: time.Now().Unix(), acc: acc,
		queue: make(chan *job, opt.Queue), done: make(chan struct{})}
	s.idle = sync.NewCond(&s.lmu)
	if opt.Parallel <= 1 {
		s.lanes = []*lane{{newSession: opt.NewSession}}
	} else {
		for i := range opt.Parallel {
			s.lanes = append(s.lanes, &lane{id: i, newSession: func() Session { return opt.NewLaneSession(i) }})
		}
	}
	s.m.init(len(s.lanes))
	if opt.CacheBytes > 0 {
		s.cache = &stateCache{budget: opt.CacheBytes}
	}
	s.routes()
	go s.work()
	return s, nil
}

// Handler is the API's HTTP handler.
func (s *Server) Handler() http.Handler { return s.m.wrap(s.acc.wrap(recoverJSON(s.mux, s.logf))) }

// Close stops taking requests, lets the queued ones run, and waits for the
// worker. Call it after http.Server.Shutdown (handlers still running would
// be refused with 503).
func (s *Server) Close() {
	s.qmu.Lock()
	if !s.closed {
		s.closed = true
		close(s.queue)
	}
	s.qmu.Unlock()
	<-s.done
}

func (s *Server) logf(format string, args ...any) {
	if s.opt.Logf != nil {
		s.opt.Logf(format, args...)
	}
}

func (s *Server) routes() {
	s.mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	s.mux.HandleFunc("POST /v1/completions", s.completions)
	s.mux.HandleFunc("GET /v1/models", s.models)
	s.mux.HandleFunc("GET /v1/models/{id}", s.model)
	s.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /metrics", s.metrics)
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{Status: http.StatusNotFound, Type: "invalid_request_error",
			Message: fmt.Sprintf("no route %s %s: the server answers POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health, GET /metrics and the chat page at GET /", r.Method, r.URL.Path)})
	})
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

func (s *Server) modelObject() modelObject {
	return modelObject{ID: s.opt.Model, Object: "model", Created: s.created, OwnedBy: "strata"}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []modelObject{s.modelObject()}})
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	if e := s.checkModel(r.PathValue("id")); e != nil || r.PathValue("id") == "" {
		writeError(w, s.unknownModel(r.PathValue("id")))
		return
	}
	writeJSON(w, http.StatusOK, s.modelObject())
}

func (s *Server) checkModel(name string) *apiError {
	if name == "" || name == s.opt.Model {
		return nil
	}
	return s.unknownModel(name)
}

func (s *Server) unknownModel(name string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: "invalid_request_error", Param: strp("model"), Code: strp("model_not_found"),
		Message: fmt.Sprintf("the model %q does not exist: this server serves %q", name, s.opt.Model)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := jsonMarshal(v)
	if err != nil {
		writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// recoverJSON turns a panic in a handler into a 500 with the error object
// (when nothing was written yet) and keeps the server serving.
func recoverJSON(h http.Handler, logf func(string, ...any)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				logf("serve: panic in %s %s: %v\n%s", r.Method, r.URL.Path, v, debug.Stack())
				writeError(w, &apiError{Status: http.StatusInternalServerError, Type: "server_error",
					Message: fmt.Sprintf("internal error: %v", v)})
			}
		}()
		h.ServeHTTP(w, r)
	})
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// job is one request's generation, run by the worker.
type job struct {
	ctx    context.Context
	prompt []int
	n      int
	gopt   engine.GenerateOptions
	// start is called when the job begins (a stream writes its headers);
	// token with each generated token (ErrStop ends the reply).
	start func()
	token func(id int) error
	// logits, when set, is called before token with the token's row of
	// raw logits (for logprobs).
	logits func(id int, row []float32)
	// next is the request's next choice (n > 1), run right after this one
	// on the same session; splitPrompt prefills the prompt but its last
	// token first and marks the session there, so the next choice rewinds
	// to the mark and feeds only that token.
	next        *job
	splitPrompt bool

	// Results, set by the worker before done is closed.
	out       []int
	reused    int
	err       error
	cancelled bool // the request's context ended it
	restored  bool // resumed from a saved state
	lane      int  // the lane (session) it ran on
	ttft      time.Duration
	total     time.Duration
	done      chan struct{}
}

// submit queues j, or refuses it with 503 when the queue is full.
func (s *Server) submit(j *job) *apiError {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.closed {
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("shutting_down"), Message: "the server is shutting down"}
	}
	s.m.queued.Add(1)
	select {
	case s.queue <- j:
		return nil
	default:
		s.m.queued.Add(-1)
		s.m.rejected.Add(1)
		return &apiError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("queue_full"),
			Message: fmt.Sprintf("the server is busy: %d requests running (--parallel) and %d waiting (--queue); retry later", len(s.lanes), s.opt.Queue)}
	}
}

// work hands each queued job to an idle lane (one is waited for before a
// job leaves the queue, so --queue jobs wait beyond those running) and
// returns when the queue is closed and every job has finished.
func (s *Server) work() {
	defer close(s.done)
	var running sync.WaitGroup
	defer running.Wait()
	for {
		s.lmu.Lock()
		for !slices.ContainsFunc(s.lanes, func(l *lane) bool { return !l.busy }) {
			s.idle.Wait()
		}
		s.lmu.Unlock()
		j, ok := <-s.queue
		if !ok {
			return
		}
		s.m.queued.Add(-1)
		l := s.pickLane(j.prompt)
		running.Add(1)
		go func() {
			defer running.Done()
			s.run(l, j)
		}()
	}
}

// pickLane takes the idle lane whose kept tokens share the longest prefix
// with prompt (a conversation comes back to its lane), the least recently
// used one among equals.
func (s *Server) pickLane(prompt []int) *lane {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	var best *lane
	bestN := -1
	for _, l := range s.lanes {
		if l.busy {
			continue
		}
		n := commonPrefix(l.kept, prompt)
		if n > bestN || n == bestN && l.used < best.used {
			best, bestN = l, n
		}
	}
	s.clock++
	best.busy, best.used = true, s.clock
	s.m.laneBusy(best.id, 1)
	return best
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < min(len(a), len(b)) && a[n] == b[n] {
		n++
	}
	return n
}

// run runs j on lane l in the model's turns, then frees the lane.
func (s *Server) run(l *lane, j *job) {
	for j != nil { // a request's choices, one after another on this lane
		s.turns.acquire(len(j.prompt) <= j.gopt.PrefillRows)
		s.m.busy.Add(1)
		s.runJob(l, j)
		s.m.busy.Add(-1)
		s.m.record(j)
		if s.cache != nil {
			s.m.setCache(s.cache)
		}
		if s.opt.EngineStats != nil {
			s.m.setEngine(s.opt.EngineStats())
		}
		s.turns.release()
		next := j.next
		if next == nil {
			s.lmu.Lock()
			l.busy = false
			s.m.laneBusy(l.id, -1)
			s.idle.Signal()
			s.lmu.Unlock()
		}
		close(j.done)
		j = next
	}
}

// runJob runs one generation on the lane's kept session. A panic is
// recovered: the job fails and the lane's session starts over.
func (s *Server) runJob(l *lane, j *job) {
	if err := j.ctx.Err(); err != nil {
		j.err, j.cancelled = err, true
		return
	}
	defer func() {
		if v := recover(); v != nil {
			s.logf("serve: panic in a generation (the session starts over): %v\n%s", v, debug.Stack())
			j.err = fmt.Errorf("internal error: %v", v)
			l.sess, l.kept, l.marks = nil, nil, nil
		}
	}()
	j.lane = l.id
	feed, history, restored := s.prepare(l, j.prompt)
	j.reused, j.restored = len(j.prompt)-len(feed), restored
	g := j.gopt
	g.History = history
	g.OnTokenLogits = j.logits
	if len(s.lanes) > 1 {
		g.Turn = func(left int) error {
			s.turns.yield(left > 0 && left <= g.PrefillRows)
			return nil
		}
	}
	begin := time.Now()
	if j.splitPrompt && len(feed) > 1 {
		head := feed[:len(feed)-1]
		hg := j.gopt
		hg.Turn = g.Turn
		if _, err := l.sess.Generate(head, 0, hg); err != nil {
			j.err = err
			s.logf("serve: generation failed (the session starts over): %v", err)
			l.sess, l.kept, l.marks = nil, nil, nil
			return
		}
		s.markBoundary(l, len(j.prompt)-1)
		g.History = append(slices.Clip(history), head...)
		feed = feed[len(head):]
	}
	count := 0
	g.OnToken = func(id int) error {
		if count == 0 {
			j.ttft = time.Since(begin)
			s.markBoundary(l, len(j.prompt))
		}
		count++
		if j.ctx.Err() != nil {
			j.cancelled = true
			return engine.ErrStop
		}
		return j.token(id)
	}
	if j.start != nil {
		j.start()
	}
	out, err := l.sess.Generate(feed, j.n, g)
	j.total = time.Since(begin)
	j.out, j.err = out, err
	if err != nil {
		s.logf("serve: generation failed (the session starts over): %v", err)
		l.sess, l.kept, l.marks = nil, nil, nil
		return
	}
	// The session has consumed the prompt and every returned token but the
	// last.
	l.kept = append(slices.Clone(j.prompt), out[:max(len(out)-1, 0)]...)
}

// markBoundary remembers the live session's state at the end of a prompt
// (when its first token is made, before it is fed).
func (s *Server) markBoundary(l *lane, pos int) {
	mk, ok := l.sess.(Marker)
	if !ok || s.opt.NoReuse || l.sess.Pos() != pos {
		return
	}
	if len(l.marks) > 0 && l.marks[len(l.marks)-1].pos >= pos {
		l.marks = nil // not past the last one: a stale list
	}
	l.marks = append(l.marks, mark{pos: pos, m: mk.Mark()})
	if len(l.marks) > maxMarks {
		l.marks = l.marks[1:]
	}
}

// prepare returns what to feed for prompt on lane l and the history before
// it, and whether a saved state was restored for it. In order of
// preference: only the new tokens when prompt extends the tokens the
// lane's live session holds; else
// the most tokens reused from a turn-boundary mark of the live session
// (rewound; the recurrent state cannot be rewound otherwise) or from a saved
// state that prompt extends; else the whole prompt on a fresh session. With a
// state cache, the live conversation is saved before the session leaves it.
func (s *Server) prepare(l *lane, prompt []int) (feed, history []int, restored bool) {
	k := len(l.kept)
	if s.opt.NoReuse {
		l.sess, l.kept, l.marks = l.newSession(), nil, nil
		return prompt, nil, false
	}
	live := l.sess != nil && k > 0 && l.sess.Pos() == k
	if live && len(prompt) > k && slices.Equal(prompt[:k], l.kept) {
		return prompt[k:], l.kept, false
	}
	// The latest mark within the common prefix.
	var rewind *mark
	if live {
		common := commonPrefix(l.kept, prompt)
		for i := len(l.marks) - 1; i >= 0; i-- {
			if m := &l.marks[i]; m.pos <= common && m.pos < len(prompt) {
				rewind = m
				break
			}
		}
	}
	var saved *savedState
	if s.cache != nil {
		saved = s.cache.best(prompt)
	}
	if rewind != nil && (saved == nil || rewind.pos >= len(saved.tokens)) {
		if err := l.sess.(Marker).Rewind(rewind.m); err == nil && l.sess.Pos() == rewind.pos {
			l.kept = l.kept[:rewind.pos:rewind.pos]
			l.marks = slices.DeleteFunc(l.marks, func(m mark) bool { return m.pos > rewind.pos })
			return prompt[rewind.pos:], l.kept, false
		}
		l.sess, live = nil, false
	}
	if sv, ok := l.sess.(Saver); ok && s.cache != nil && live && !s.cache.has(l.kept) {
		st, n := sv.Save()
		s.cache.put(l.kept, st, n)
	}
	if saved != nil {
		if l.sess == nil {
			l.sess = l.newSession()
		}
		l.marks = nil
		if sv, ok := l.sess.(Saver); ok {
			sv.Restore(saved.state)
			if l.sess.Pos() == len(saved.tokens) {
				l.kept = saved.tokens
				return prompt[len(saved.tokens):], saved.tokens, true
			}
		}
	}
	if l.sess == nil || l.sess.Pos() > 0 {
		l.sess = l.newSession()
	}
	l.kept, l.marks = nil, nil
	return prompt, nil, false
}
