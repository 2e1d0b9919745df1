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
	strata "github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/serve"
	"github.com/strata-llm/strata/runtime/stream"
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

With neither --gguf nor --hf it serves the embedded default model, when that
has a tokenizer.

SIGINT or SIGTERM stops taking requests, lets the running ones finish (up to
--grace, then cancels them) and saves the spec gate's state and the expert
usage history as run does. docs/serve.md has the details.`

// serveSignal is what ends strata serve (a test replaces it).
var serveSignal = func() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func serveCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("serve", "[--gguf FILE | --hf DIR] [--host 127.0.0.1] [--port 8080] [--queue N]", serveAbout, stderr)
	arts := addArtifactsFlag(fs)
	hf := fs.String("hf", "", "HF checkpoint `directory` (config.json, model.safetensors, tokenizer.json)")
	ggufPath := fs.String("gguf", "", "GGUF model `file` (with its tokenizer metadata)")
	host := fs.String("host", "127.0.0.1", "address to listen on (0.0.0.0: every interface)")
	port := fs.Int("port", 8080, "TCP port to listen on (0: any free port, printed at start)")
	alias := fs.String("alias", "", "the model id /v1/models lists and requests name (default: the file or directory name)")
	queue := fs.Int("queue", 8, "requests that may wait behind the running one; more get 503")
	timeout := fs.Duration("timeout", 10*time.Minute, "time limit of one request, its wait in the queue included (0: none)")
	writeTimeout := fs.Duration("write-timeout", 30*time.Second, "a streaming client that stops reading for this `long` loses its stream, so it cannot hold the engine")
	maxBody := fs.Int64("max-body", 8<<20, "largest request body in `bytes`")
	maxTokens := fs.Int("max-tokens", 0, "reply length when a request gives no max_tokens (0: up to the end of the context)")
	grace := fs.Duration("grace", 30*time.Second, "on SIGINT/SIGTERM, how long running requests may finish before they are cancelled")
	cacheMB := fs.Int64("cache-mb", 0, "keep copies of the session state of conversations the server switches away from, up to this many `MB` (LRU), so a conversation that comes back resumes without prefilling again (0: only the last one's live session)")
	noReuse := fs.Bool("no-reuse", false, "prefill every prompt whole on a fresh session (no prefix reuse)")
	ctxLen := fs.Int("context", 0, "KV-cache length in tokens (default: min(max_position_embeddings, 32768))")
	prefill := fs.Int("prefill-rows", 0, "rows per prefill window (default: the model config's windows.prefill_rows)")
	specFlag := fs.String("spec", "0", "speculative decoding: `auto`, 0 (off), or a fixed number of drafts")
	suffix := fs.Int("suffix-draft", 3, "most suffix (prompt-lookup) drafts per window with --spec; 0 turns it off")
	specState := fs.String("spec-state", "", "with --spec auto: the spec gate's estimates, read at start and saved at shutdown (default: FILE.spec next to a --gguf FILE; - for none)")
	sf := addSamplingFlags(fs)
	threads := fs.Int("threads", 0, "goroutines per cpu kernel (0: the model's runtime.threads, else one per core)")
	arena := fs.Int("arena-experts", 0, "stream the routed experts through an arena of this many experts (0: all resident)")
	ioThreads := fs.Int("io-threads", 8, "reader threads for expert streaming")
	backend := fs.String("backend", strata.BackendCPU, "what runs the window graphs: cpu, mslemu, metal or metal-emu")
	noThink := fs.Bool("no-think", false, "render the chat template with enable_thinking=false unless a request's chat_template_kwargs says otherwise")
	tokPath := fs.String("tokenizer", "", "HF tokenizer.json `file` (default: the --hf directory's or the GGUF's own)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *hf != "" && *ggufPath != "":
		return usagef("--hf and --gguf are two models; give one")
	case *port < 0 || *port > 65535:
		return usagef("--port is %d: expected 0 to 65535", *port)
	case *queue < 0:
		return usagef("--queue must be ≥ 0, got %d", *queue)
	case *maxBody < 1:
		return usagef("--max-body must be ≥ 1, got %d", *maxBody)
	case *maxTokens < 0 || *timeout < 0 || *grace < 0 || *cacheMB < 0 || *writeTimeout <= 0:
		return usagef("--max-tokens, --timeout, --grace and --cache-mb must be ≥ 0 and --write-timeout > 0")
	case *suffix < 0 || *arena < 0 || *ioThreads < 1 || *ctxLen < 0 || *prefill < 0:
		return usagef("--suffix-draft, --arena-experts, --context and --prefill-rows must be ≥ 0 and --io-threads ≥ 1")
	case !slices.Contains(strata.Backends, *backend):
		return usagef("--backend is %q, expected one of %s", *backend, strings.Join(strata.Backends, ", "))
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	sampling, err := sf.params()
	if err != nil {
		return err
	}
	sp, err := parseSpec(*specFlag)
	if err != nil {
		return err
	}
	sp.SuffixDraft, sp.MTP, sp.Stats = *suffix, true, &engine.SpecStats{}
	tm, err := loadText(*tokPath, *hf, *ggufPath)
	if errors.Is(err, text.ErrNoTokenizer) {
		return fmt.Errorf("%w: the server needs one; give --tokenizer tokenizer.json", err)
	}
	if err != nil {
		return err
	}
	addr := net.JoinHostPort(*host, strconv.Itoa(*port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--host/--port: %w", err)
	}
	defer ln.Close()

	start := time.Now()
	l, err := openModelIn(*arts, *hf, *ggufPath, strata.HFOptions{PrefillRows: *prefill, Context: *ctxLen, ArenaExperts: *arena,
		Stream: stream.Options{Threads: *ioThreads}, Backend: *backend, Threads: *threads,
		Warn: func(err error) { fmt.Fprintf(stderr, "strata: warning: %v\n", err) }})
	if err != nil {
		return err
	}
	defer l.Close()
	if v, m := tm.Tok.Vocab(), l.Config.Architecture.VocabSize; v > m {
		return fmt.Errorf("the tokenizer has %d token ids but model %s only %d", v, l.Config.Name, m)
	}
	gate := loadSpecGate(&sp, *specState, *ggufPath, l, *backend, *arena, *ioThreads, stderr)
	eos, err := eosIDs(*hf, *ggufPath, l.Config)
	if err != nil {
		return fmt.Errorf("reading the EOS ids: %w", err)
	}
	name := *alias
	if name == "" && *hf+*ggufPath == "" {
		name = l.Config.Name // the embedded default model
	} else if name == "" {
		name = strings.TrimSuffix(filepath.Base(filepath.Clean(*hf+*ggufPath)), ".gguf")
	}
	seedSet := false
	fs.Visit(func(f *flag.Flag) { seedSet = seedSet || f.Name == "seed" })
	api, err := serve.New(serve.Options{
		RandomSeed: !seedSet,
		Model:      name, Text: tm, Context: l.Config.Runtime.ContextLength, Vocab: l.Config.Architecture.VocabSize,
		NewSession: func() serve.Session { return serve.EngineSession(l.Model.NewSession()) }, CacheBytes: *cacheMB << 20,
		Generate:  engine.GenerateOptions{PrefillRows: l.PrefillRows, Spec: sp, Sampling: sampling, EOS: eos, IgnoreEOS: *sf.ignoreEOS},
		MaxTokens: *maxTokens, Queue: *queue, Timeout: *timeout, MaxBody: *maxBody, WriteTimeout: *writeTimeout, Stop: sf.stops,
		NoThink: *noThink, NoReuse: *noReuse,
		EngineStats: func() serve.EngineStats {
			e := serve.EngineStats{Spec: sp.Depth != 0, Drafted: sp.Stats.Drafted, Accepted: sp.Stats.Accepted, Streaming: *arena > 0}
			if e.Streaming {
				ss := l.Model.StreamStats()
				e.ExpertHits, e.ExpertMisses = ss.Hits, ss.Misses
			}
			return e
		},
		Logf: func(format string, args ...any) { fmt.Fprintf(stderr, "strata: "+format+"\n", args...) },
	})
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: api.Handler(), ReadHeaderTimeout: 30 * time.Second}
	ctx, stop := serveSignal()
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(stderr, "strata: serving %s (%s, context %d tokens) on http://%s after %v; Ctrl-C stops\n",
		name, l.Config.Name, l.Config.Runtime.ContextLength, ln.Addr(), time.Since(start).Round(time.Millisecond))
	select {
	case err := <-served:
		api.Close()
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	fmt.Fprintf(stderr, "strata: shutting down: finishing the running requests (up to %v)\n", *grace)
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		fmt.Fprintf(stderr, "strata: cancelling the requests still running after %v\n", *grace)
		srv.Close() // their contexts end; each generation stops at its next token
	}
	api.Close()
	gate.save(stderr)
	fmt.Fprintln(stderr, "strata: stopped")
	return nil
}
