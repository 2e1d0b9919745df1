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

The engine runs one sequence, so requests run one at a time in arrival order;
up to --queue more wait, and beyond that a request gets 503 with Retry-After.
A client that disconnects stops its generation at the next token. The session
of the last request is kept: when the next prompt starts with exactly the
tokens it holds (a chat's next turn), only the new tokens are prefilled; a
prompt that departs from them after the previous prompt's end (Qwen3 drops the
last reply's thinking) rewinds there. --cache-mb keeps copies of the state of
conversations the server switched away from, so they resume too.

The sampling flags are the defaults a request's own fields (temperature,
top_p, top_k, min_p, presence_penalty, frequency_penalty, seed) override; the
default is greedy. A sampled request without "seed" gets a fresh random seed
unless --seed is given. Qwen's <think> blocks come back as reasoning_content and
its <tool_call> JSON as tool_calls when the request offers tools.

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
	timeout, writeTimeout, grace          time.Duration
	maxBody, cacheMB                      int64
	noReuse, noThink, seedSet, special    bool
	sf                                    *samplingFlags
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
	api, err := serve.New(f.apiOptions(name, l, tm, engine.GenerateOptions{PrefillRows: l.PrefillRows, Spec: sp, Sampling: sampling, EOS: eos, IgnoreEOS: *f.sf.ignoreEOS}, stderr))
	if err != nil {
		return err
	}
	banner := fmt.Sprintf("strata: serving %s (%s, context %d tokens) on http://%s after %v; Ctrl-C stops\n",
		name, l.Config.Name, l.Model.Context(), ln.Addr(), time.Since(start).Round(time.Millisecond))
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
	fs.IntVar(&f.queue, "queue", 8, "requests that may wait behind the running one; more get 503")
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
	case f.maxBody < 1:
		return engine.SpecOptions{}, usagef("--max-body must be ≥ 1, got %d", f.maxBody)
	case f.maxTokens < 0 || f.timeout < 0 || f.grace < 0 || f.cacheMB < 0 || f.writeTimeout <= 0:
		return engine.SpecOptions{}, usagef("--max-tokens, --timeout, --grace and --cache-mb must be ≥ 0 and --write-timeout > 0")
	case f.suffix < 0:
		return engine.SpecOptions{}, usagef("--suffix-draft must be ≥ 0, got %d", f.suffix)
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

// apiOptions are the server's options: the model's sessions, the request
// defaults and limits the flags set, and the metrics' engine counters.
func (f *serveFlags) apiOptions(name string, l *load.Loaded, tm *text.Model, gopt engine.GenerateOptions, stderr io.Writer) serve.Options {
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
	}
}
