package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/serve"
	"github.com/strata-llm/strata/runtime/text"
)

const serveAbout = `
Serves the model over HTTP with OpenAI's API: POST /v1/chat/completions
(messages rendered with the model's chat template; streamed as server-sent
events with "stream": true), POST /v1/completions (a text prompt or token
ids), GET /v1/models, GET /health, GET /metrics (Prometheus text), and a
chat page at / for a browser.

Requests run one at a time in arrival order, or with --parallel N up to N at
once, each on a session of its own state (KV cache, recurrent state) over the
one loaded model, the engine taking turns between them window by window: a
short request's first token does not wait for a long generation to end. Up to
--queue more wait, and beyond that a request gets 503 with Retry-After. A
client that disconnects stops its generation at the next token. Each session
keeps its last request's tokens, and a request goes to the idle session that
shares the longest prefix with its prompt: when the prompt starts with exactly
the tokens it holds (a chat's next turn), only the new tokens are prefilled; a
prompt that departs from them after the previous prompt's end (Qwen3 drops the
last reply's thinking) rewinds there. --cache-mb keeps copies of the state of
conversations a session switched away from, so they resume too.

The sampling flags are the defaults a request's own fields (temperature,
top_p, top_k, min_p, repeat_penalty, presence_penalty, frequency_penalty,
seed, ignore_eos) override; the default is greedy. A sampled request without
"seed" gets a fresh random seed unless --seed is given; with one, the same
request gives the same response. "n" asks for several choices, each its own
sample (choice i's seed is mixed from the request's), run one after another
with the prompt prefilled once. "logprobs" (chat: true with "top_logprobs"
0-20; /v1/completions: 0-20 alternatives) returns each token's log
probability under the model's raw distribution (the log-softmax of its
logits, before penalties, temperature and filters), streamed too.
"ignore_eos": true runs to max_tokens. Qwen's <think> blocks come back as
reasoning_content and its <tool_call> JSON as tool_calls when the request
offers tools.

--api-key KEY or --api-key-file FILE (one key a line; both repeatable) make
every route but /health and the chat page need "Authorization: Bearer KEY"
(or "x-api-key: KEY"); others get 401 invalid_api_key. --cors-origin ORIGIN
(repeatable, or *) lets web pages on that origin call the API from a browser:
preflights are answered without a key and every response carries the CORS
headers; without it there are none.

With neither --gguf nor --hf it serves the embedded tiny-go-chat (tiny-go
fine-tuned to chat and call tools: answers in templated sentences and makes
real tool calls; a toy for trying clients, models/tiny-go-chat/README.md).

SIGINT or SIGTERM stops taking requests, lets the running ones finish (up to
--grace, then cancels them) and saves the spec gate's state and the expert
usage history as run does. docs/serve.md has the details.`

// serveSignal is what ends strata serve (a test replaces it).
var serveSignal = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

// serveFlags are strata serve's flags, parsed.
type serveFlags struct {
	model                                 *modelFlags
	host, alias, specFlag, specState, tok string
	port, queue, maxTokens, suffix        int
	parallel                              int
	timeout, writeTimeout, grace          time.Duration
	maxBody, cacheMB                      int64
	noReuse, noThink, seedSet, special    bool
	sf                                    *samplingFlags
	apiKeys, keyFiles, corsOrigins        stringList
}

func serveCmd(args []string, stdout, stderr io.Writer) error {
	f, err := parseServeFlags(args, stderr)
	if err != nil {
		return err
	}
	sp, err := f.check()
	if err != nil {
		return err
	}
	keys, err := f.keys()
	if err != nil {
		return err
	}
	sampling, err := f.sf.params()
	if err != nil {
		return err
	}
	tm, err := loadText(f.tok, f.model.hf, f.model.gguf)
	if errors.Is(err, text.ErrNoTokenizer) {
		return fmt.Errorf("%w: the server needs one; give --tokenizer tokenizer.json", err)
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.host, strconv.Itoa(f.port)))
	if err != nil {
		return fmt.Errorf("--host/--port: %w", err)
	}
	defer ln.Close()

	start := time.Now()
	l, err := f.model.open(load.Options{Warn: warner(stderr)})
	if err != nil {
		return err
	}
	defer l.Close()
	if v, m := tm.Tok.Vocab(), l.Config.Architecture.VocabSize; v > m {
		return fmt.Errorf("the tokenizer has %d token ids but model %s only %d", v, l.Config.Name, m)
	}
	gate := loadSpecGate(&sp, f.specState, f.model.gguf, l, f.model.backend, f.model.arena, f.model.ioThreads, stderr)
	eos, err := eosIDs(f.model.hf, f.model.gguf, l.Config)
	if err != nil {
		return fmt.Errorf("reading the EOS ids: %w", err)
	}
	name := f.modelName(l)
	lanes, err := newLanes(l.Model, f.parallel)
	if err != nil {
		return err
	}
	opt := f.apiOptions(name, l, lanes, tm, engine.GenerateOptions{PrefillRows: l.PrefillRows, Spec: sp, Sampling: sampling, EOS: eos, IgnoreEOS: *f.sf.ignoreEOS}, stderr)
	opt.APIKeys, opt.CORSOrigins = keys, f.corsOrigins
	api, err := serve.New(opt)
	if err != nil {
		return err
	}
	sessions := ""
	if len(lanes) > 1 {
		sessions = fmt.Sprintf(", %d sessions of %.1f MB of state each", len(lanes), float64(l.Model.LaneBytes())/1e6)
	}
	banner := fmt.Sprintf("strata: serving %s (%s, context %d tokens%s) on http://%s after %v; Ctrl-C stops\n",
		name, l.Config.Name, l.Model.Context(), sessions, ln.Addr(), time.Since(start).Round(time.Millisecond))
	if err := f.serveUntilSignal(ln, api, banner, stderr); err != nil {
		return err
	}
	gate.save(stderr)
	fmt.Fprintln(stderr, "strata: stopped")
	return nil
}

// serveUntilSignal serves the API on ln, printing banner once it listens,
// until serving fails or SIGINT/SIGTERM comes; then it stops taking
// requests and lets the running ones finish, up to --grace, before it
// cancels them.
func (f *serveFlags) serveUntilSignal(ln net.Listener, api *serve.Server, banner string, stderr io.Writer) error {
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 30 * time.Second}
	ctx, stop := serveSignal()
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprint(stderr, banner)
	select {
	case err := <-served:
		api.Close()
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintf(stderr, "strata: shutting down: finishing the running requests (up to %v)\n", f.grace)
	sctx, cancel := context.WithTimeout(context.Background(), f.grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "strata: cancelling the requests still running after %v\n", f.grace)
		srv.Close() // their contexts end; each generation stops at its next token
	}
	api.Close()
	return nil
}

// parseServeFlags declares strata serve's flags and parses args.
func parseServeFlags(args []string, stderr io.Writer) (*serveFlags, error) {
	fs := newFlagSet("serve", "[--gguf FILE | --hf DIR] [--host 127.0.0.1] [--port 8080] [--queue N]", serveAbout, stderr)
	f := &serveFlags{model: addModelFlags(fs, allModelFlags)}
	f.model.embedded = load.TinyGoChat // the default model that chats and calls tools
	fs.StringVar(&f.host, "host", "127.0.0.1", "address to listen on (0.0.0.0: every interface)")
	fs.IntVar(&f.port, "port", 8080, "TCP port to listen on (0: any free port, printed at start)")
	fs.StringVar(&f.alias, "alias", "", "the model id /v1/models lists and requests name (default: the file or directory name)")
	fs.IntVar(&f.queue, "queue", 8, "requests that may wait behind the running ones; more get 503")
	fs.IntVar(&f.parallel, "parallel", 1, "requests that run at once, each on a session with its own KV and recurrent state, taking turns window by window (the weights are loaded once; each session adds a state's memory)")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Minute, "time limit of one request, its wait in the queue included (0: none)")
	fs.DurationVar(&f.writeTimeout, "write-timeout", 30*time.Second, "a streaming client that stops reading for this `long` loses its stream, so it cannot hold the engine")
	fs.Int64Var(&f.maxBody, "max-body", 8<<20, "largest request body in `bytes`")
	fs.IntVar(&f.maxTokens, "max-tokens", 0, "reply length when a request gives no max_tokens (0: up to the end of the context)")
	fs.DurationVar(&f.grace, "grace", 30*time.Second, "on SIGINT/SIGTERM, how long running requests may finish before they are cancelled")
	fs.Int64Var(&f.cacheMB, "cache-mb", 0, "keep copies of the session state of conversations the server switches away from, up to this many `MB` (LRU), so a conversation that comes back resumes without prefilling again (0: only the last one's live session)")
	fs.BoolVar(&f.noReuse, "no-reuse", false, "prefill every prompt whole on a fresh session (no prefix reuse)")
	fs.StringVar(&f.specFlag, "spec", "0", "speculative decoding: `auto`, 0 (off), or a fixed number of drafts")
	fs.IntVar(&f.suffix, "suffix-draft", 3, "most suffix (prompt-lookup) drafts per window with --spec; 0 turns it off")
	fs.StringVar(&f.specState, "spec-state", "", "with --spec auto: the spec gate's estimates, read at start and saved at shutdown (default: FILE.spec next to a --gguf FILE; - for none)")
	f.sf = addSamplingFlags(fs)
	fs.BoolVar(&f.noThink, "no-think", false, "render the chat template with enable_thinking=false unless a request's chat_template_kwargs says otherwise")
	fs.BoolVar(&f.special, "parse-special", false, "special-token text in chat messages (<|im_end|>, …) is control tokens unless a request's parse_special is false (default: plain text, so a client cannot write a turn of its own)")
	fs.Var(&f.apiKeys, "api-key", "require this `key` on every request but /health and the chat page: Authorization: Bearer KEY (or x-api-key: KEY); repeatable. A key on the command line shows in ps: prefer --api-key-file")
	fs.Var(&f.keyFiles, "api-key-file", "require one of the keys in this `file` (one a line; blank lines and # comments skipped); repeatable, with --api-key too")
	fs.Var(&f.corsOrigins, "cors-origin", "let web pages from this `origin` (https://host[:port], or * for any) call the API from a browser: preflights answered, CORS headers on every response; repeatable (default: none, no CORS headers)")
	fs.StringVar(&f.tok, "tokenizer", "", "HF tokenizer.json `file` (default: the --hf directory's or the GGUF's own)")
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	fs.Visit(func(fl *flag.Flag) { f.seedSet = f.seedSet || fl.Name == "seed" })
	return f, nil
}

// check validates the flags and returns the speculation settings they ask
// for.
func (f *serveFlags) check() (engine.SpecOptions, error) {
	if err := f.model.check(); err != nil {
		return engine.SpecOptions{}, err
	}
	switch {
	case f.port < 0 || f.port > 65535:
		return engine.SpecOptions{}, usagef("--port is %d: expected 0 to 65535", f.port)
	case f.queue < 0:
		return engine.SpecOptions{}, usagef("--queue must be ≥ 0, got %d", f.queue)
	case f.parallel < 1:
		return engine.SpecOptions{}, usagef("--parallel must be ≥ 1, got %d", f.parallel)
	case f.maxBody < 1:
		return engine.SpecOptions{}, usagef("--max-body must be ≥ 1, got %d", f.maxBody)
	case f.maxTokens < 0 || f.timeout < 0 || f.grace < 0 || f.cacheMB < 0 || f.writeTimeout <= 0:
		return engine.SpecOptions{}, usagef("--max-tokens, --timeout, --grace and --cache-mb must be ≥ 0 and --write-timeout > 0")
	case f.suffix < 0:
		return engine.SpecOptions{}, usagef("--suffix-draft must be ≥ 0, got %d", f.suffix)
	}
	for _, o := range f.corsOrigins {
		if err := serve.CheckOrigin(o); err != nil {
			return engine.SpecOptions{}, usagef("--cors-origin: %v", strings.TrimPrefix(err.Error(), "serve: "))
		}
	}
	for _, k := range f.apiKeys {
		if k == "" || strings.TrimSpace(k) != k {
			return engine.SpecOptions{}, usagef("--api-key is empty or has spaces around it")
		}
	}
	sp, err := parseSpec(f.specFlag)
	if err != nil {
		return sp, err
	}
	sp.SuffixDraft, sp.MTP, sp.Stats = f.suffix, true, &engine.SpecStats{}
	return sp, nil
}

// modelName is the model id the API lists: --alias, else the file or
// directory name, else the default model's name.
func (f *serveFlags) modelName(l *load.Loaded) string {
	switch {
	case f.alias != "":
		return f.alias
	case f.model.hf+f.model.gguf == "":
		return l.Config.Name // the embedded default model
	}
	return strings.TrimSuffix(filepath.Base(filepath.Clean(f.model.hf+f.model.gguf)), ".gguf")
}

// newLanes gives each of n > 1 sessions a lane of its own state (the
// first is the model's own); with n = 1 the model's own session serves.
func newLanes(m *engine.Model, n int) ([]*engine.Lane, error) {
	if n <= 1 {
		return nil, nil
	}
	lanes := []*engine.Lane{m.Lane()}
	for len(lanes) < n {
		l, err := m.NewLane()
		if err != nil {
			return nil, fmt.Errorf("--parallel %d: %w", n, err)
		}
		lanes = append(lanes, l)
	}
	return lanes, nil
}

// apiOptions are the server's options: the model's sessions, the request
// defaults and limits the flags set, and the metrics' engine counters.
func (f *serveFlags) apiOptions(name string, l *load.Loaded, lanes []*engine.Lane, tm *text.Model, gopt engine.GenerateOptions, stderr io.Writer) serve.Options {
	sp := gopt.Spec
	return serve.Options{
		RandomSeed: !f.seedSet,
		Model:      name, Text: tm, Context: l.Model.Context(), Vocab: l.Config.Architecture.VocabSize,
		NewSession: func() serve.Session { return serve.EngineSession(l.Model.NewSession()) }, CacheBytes: f.cacheMB << 20,
		Generate:  gopt,
		MaxTokens: f.maxTokens, Queue: f.queue, Timeout: f.timeout, MaxBody: f.maxBody, WriteTimeout: f.writeTimeout, Stop: f.sf.stops,
		NoThink: f.noThink, NoReuse: f.noReuse, ParseSpecial: f.special,
		EngineStats: func() serve.EngineStats {
			e := serve.EngineStats{Spec: sp.Depth != 0, Drafted: sp.Stats.Drafted, Accepted: sp.Stats.Accepted, Streaming: f.model.arena > 0}
			if e.Streaming {
				ss := l.Model.StreamStats()
				e.ExpertHits, e.ExpertMisses = ss.Hits, ss.Misses
			}
			return e
		},
		Logf: func(format string, args ...any) { fmt.Fprintf(stderr, "strata: "+format+"\n", args...) },
		// --parallel: a session on each lane.
		Parallel:       len(lanes),
		NewLaneSession: func(i int) serve.Session { return serve.EngineSession(lanes[i].NewSession()) },
	}
}

// keys are the API keys of --api-key and --api-key-file. Errors name the
// file and the line, never a key.
func (f *serveFlags) keys() ([]string, error) {
	keys := slices.Clone([]string(f.apiKeys))
	for _, name := range f.keyFiles {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("--api-key-file: %w", err)
		}
		n := 0
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "#") {
				continue
			}
			if strings.ContainsAny(line, " \t") {
				return nil, fmt.Errorf("--api-key-file %s, line %d: a key has no spaces inside (one key per line)", name, i+1)
			}
			keys, n = append(keys, line), n+1
		}
		if n == 0 {
			return nil, fmt.Errorf("--api-key-file %s: no key in it (one key per line)", name)
		}
	}
	return keys, nil
}
