package main

import (
	"flag"
	"slices"
	"strings"

	"github.com/strata-llm/strata/runtime/load"
)

// modelFlags are the flags the commands that open a model share (run,
// serve, perplexity, imatrix; bench compares lists and has its own): which
// model (--hf, --gguf, --artifacts, --no-generate, always) and, for the commands that take
// them, what runs it and how. Each flag has one help text and one check, so
// the commands teach and refuse it alike.
type modelFlags struct {
	hf, gguf, backend                           string
	threads, arena, ioThreads, context, prefill int
	arts                                        *artifactFlags
	has                                         modelFlagGroups
	// embedded is the embedded model opened without --hf and --gguf
	// (load.TinyGo or load.TinyGoChat; "": tiny-go).
	embedded string
}

// modelFlagGroups pick which of the shared flags beyond the model's paths
// a command declares.
type modelFlagGroups uint8

const (
	backendFlag    modelFlagGroups = 1 << iota // --backend
	threadsFlag                                // --threads
	streamingFlags                             // --arena-experts, --io-threads
	windowFlags                                // --context, --prefill-rows

	allModelFlags = backendFlag | threadsFlag | streamingFlags | windowFlags
)

// Help texts of the shared flags.
const (
	hfHelp = "HF checkpoint `directory` (config.json + model.safetensors or a sharded index, tokenizer.json for text; " +
		"default, with neither --hf nor --gguf: the embedded default model, tiny-go; for serve and run --chat tiny-go-chat, the same model tuned to chat and call tools)"
	ggufHelp = "GGUF model `file` (strata convert or synth, or a llama.cpp qwen3next file; its tokenizer in the metadata; " +
		"experts through FILE.experts when present)"
	backendHelp = "what runs the window graphs: `cpu` (Go kernels), mslemu (the generated MSL, compiled with clang and run on the CPU), " +
		"metal (the GPU; macOS on Apple silicon), metal-emu (the metal backend's command stream, run by the MSL emulator) or " +
		"cuda (the generated MSL on an NVIDIA GPU through a CUDA prelude; Linux with libcuda and NVRTC)"
	threadsHelp = "goroutines per cpu kernel (0: the model's runtime.threads, else one per core)"
	arenaHelp   = "stream the routed experts through an arena of this many experts (0: run sizes it by --arena-gb or from the available memory, " +
		"serve and perplexity keep every expert resident)"
	ioThreadsHelp = "reader threads for expert streaming (2 of them reserved for urgent misses)"
	contextHelp   = "KV-cache length in tokens, at most the model's max_position_embeddings (0, the default: the model config's " +
		"runtime.context_length, for an HF checkpoint min(max_position_embeddings, 32768))"
	prefillHelp = "rows per prefill window (default: the model config's windows.prefill_rows)"
)

// addModelFlags declares --hf, --gguf, --artifacts, --no-generate and the groups in has.
func addModelFlags(fs *flag.FlagSet, has modelFlagGroups) *modelFlags {
	f := &modelFlags{backend: load.BackendCPU, ioThreads: 8, has: has}
	f.arts = addArtifactsFlag(fs)
	fs.StringVar(&f.hf, "hf", "", hfHelp)
	fs.StringVar(&f.gguf, "gguf", "", ggufHelp)
	if has&backendFlag != 0 {
		fs.StringVar(&f.backend, "backend", f.backend, backendHelp)
	}
	if has&threadsFlag != 0 {
		fs.IntVar(&f.threads, "threads", 0, threadsHelp)
	}
	if has&streamingFlags != 0 {
		fs.IntVar(&f.arena, "arena-experts", 0, arenaHelp)
		fs.IntVar(&f.ioThreads, "io-threads", f.ioThreads, ioThreadsHelp)
	}
	if has&windowFlags != 0 {
		fs.IntVar(&f.context, "context", 0, contextHelp)
		fs.IntVar(&f.prefill, "prefill-rows", 0, prefillHelp)
	}
	return f
}

// check validates the shared flags.
func (f *modelFlags) check() error {
	if f.hf != "" && f.gguf != "" {
		return usagef("--hf and --gguf are two models; give one")
	}
	if err := checkThreads(f.threads); err != nil {
		return err
	}
	switch {
	case f.arena < 0 || f.ioThreads < 1:
		return usagef("--arena-experts must be ≥ 0 and --io-threads ≥ 1, got %d and %d", f.arena, f.ioThreads)
	case !slices.Contains(load.Backends, f.backend):
		return usagef("--backend is %q, expected one of %s", f.backend, strings.Join(load.Backends, ", "))
	case f.prefill < 0:
		return usagef("--prefill-rows must be ≥ 1, got %d", f.prefill)
	case f.context < 0:
		return usagef("--context must be ≥ 1, got %d", f.context)
	}
	return nil
}

// apply sets the load options of the groups the command declared.
func (f *modelFlags) apply(opt *load.Options) {
	if f.has&backendFlag != 0 {
		opt.Backend = f.backend
	}
	if f.has&threadsFlag != 0 {
		opt.Threads = f.threads
	}
	if f.has&streamingFlags != 0 {
		opt.ArenaExperts, opt.Stream.Threads = f.arena, f.ioThreads
	}
	if f.has&windowFlags != 0 {
		opt.Context, opt.PrefillRows = f.context, f.prefill
	}
}

// open opens the model the flags name with opt, the shared flags applied.
func (f *modelFlags) open(opt load.Options) (*load.Loaded, error) {
	f.apply(&opt)
	return openModelIn(*f.arts, f.hf, f.gguf, f.embedded, opt)
}

// checkPaths reports a --hf that is not a directory or a --gguf that is
// not a file.
func (f *modelFlags) checkPaths() error { return checkModelPaths(f.hf, f.gguf) }
