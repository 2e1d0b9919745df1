package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/runtime/backend/metal"
	"github.com/strata-llm/strata/runtime/bench"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/load"
)

func init() {
	commands["bench"] = command{"measure prefill and decode speed, configurations side by side", benchCmd}
}

const benchAbout = `
Measures prompt processing (pp: the prompt's prefill windows, tokens/s) and
token generation (tg: decode windows, tokens/s) for every combination of the
comma-separated values of --backend, --spec and --arena-experts, side by side
on one model. Every configuration is loaded once and kept; repetitions are
interleaved (each repetition runs the configurations in a rotated order) so a
machine that drifts affects them alike. The first configuration is the
baseline every tg ratio is taken against. Timings are wall time of the engine's
Generate, sampling included; each row gives mean ± standard deviation over
the repetitions after --warmup unmeasured ones.

The prompt is --tokens, or -p pseudo-random token ids from --seed. Under
--spec, drafts of the suffix drafter only hit on repetitive prompts; give
one with --tokens (or --repeat) to measure that case.`

// benchLabel names configuration c in the table by what varies (all of
// it when nothing does).
func benchLabel(c bench.Config, vary map[string]bool) string {
	var parts []string
	if vary["backend"] {
		parts = append(parts, "backend="+c.Backend)
	}
	if vary["spec"] {
		parts = append(parts, "spec="+c.SpecName())
	}
	if vary["arena"] {
		parts = append(parts, "arena="+strconv.Itoa(c.Arena))
	}
	if len(parts) == 0 {
		return c.String()
	}
	return strings.Join(parts, " ")
}

func benchCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", "[--hf DIR | --gguf FILE] [-p N] [-n N] [-r N] [--backend LIST] [--spec LIST] [--arena-experts LIST]", benchAbout, stderr)
	arts := addArtifactsFlag(fs)
	hf := fs.String("hf", "", "HF checkpoint `directory`")
	ggufPath := fs.String("gguf", "", "GGUF model `file` (experts through FILE.experts when present)")
	promptLen := fs.Int("p", 64, "prompt tokens (pp), pseudo-random from --seed unless --tokens is given")
	gen := fs.Int("n", 32, "generated tokens (tg)")
	reps := fs.Int("r", 3, "measured repetitions")
	warmup := fs.Int("warmup", 1, "unmeasured repetitions first (page faults, kernel builds)")
	tokens := fs.String("tokens", "", "prompt token `ids`, comma-separated")
	repeat := fs.Int("repeat", 1, "repeat the prompt this many times (text where suffix drafts hit)")
	seed := fs.Int64("seed", 1, "seed of the pseudo-random prompt")
	prefill := fs.Int("prefill-rows", 0, "rows per prefill window (default: the model config's)")
	backends := fs.String("backend", load.BackendCPU, "`backends` to compare, comma-separated: "+strings.Join(load.Backends, ", "))
	specs := fs.String("spec", "0", "speculation `settings` to compare, comma-separated: auto or a number of drafts")
	arenas := fs.String("arena-experts", "0", "expert `arena sizes` to compare, comma-separated (0: every expert resident)")
	suffix := fs.Int("suffix-draft", 3, "most suffix drafts per window with --spec")
	profile := cpuProfileFlag(fs)
	icb := fs.Bool("icb", false, "metal backends: replay indirect command buffers")
	threads := fs.Int("threads", 0, "goroutines per cpu kernel (0: the model's runtime.threads, else one per core)")
	sf := addStreamFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	if err := sf.check(0); err != nil {
		return err
	}
	if err := checkModelPaths(*hf, *ggufPath); err != nil {
		return err
	}
	if *promptLen < 1 || *gen < 1 || *reps < 1 || *warmup < 0 || *repeat < 1 {
		return usagef("-p, -n, -r and --repeat must be ≥ 1 and --warmup ≥ 0, got %d, %d, %d, %d, %d", *promptLen, *gen, *reps, *repeat, *warmup)
	}
	if *hf != "" && *ggufPath != "" {
		return usagef("--hf and --gguf are two models; give one")
	}
	configs, vary, err := benchConfigs(*backends, *specs, *arenas)
	if err != nil {
		return err
	}
	runs, err := bench.Open(configs, *suffix, func(c bench.Config) (*load.Loaded, error) {
		opt := load.Options{PrefillRows: *prefill, ArenaExperts: c.Arena, Backend: c.Backend, History: "-",
			Stream: stream.Options{}, Metal: metal.Options{ICB: *icb}, Threads: *threads}
		sf.apply(&opt)
		opt.Note = noter(stderr)
		if c.Arena > 0 {
			opt.ArenaGB = 0 // this configuration's --arena-experts value
		}
		return openModelIn(*arts, *hf, *ggufPath, opt)
	})
	if err != nil {
		return err
	}
	defer bench.Close(runs)

	cfg := runs[0].Loaded.Config
	prompt, err := benchPrompt(*tokens, *promptLen, *seed, cfg.Architecture.VocabSize)
	if err != nil {
		return err
	}
	base := prompt
	for i := 1; i < *repeat; i++ {
		prompt = append(prompt, base...)
	}
	if need := len(prompt) + *gen; need > cfg.Runtime.ContextLength {
		return usagef("a prompt of %d tokens and %d generated need a context of %d, the model has %d", len(prompt), *gen, need, cfg.Runtime.ContextLength)
	}
	fmt.Fprintf(stdout, "model %s (%s): prompt %d tokens, %d generated; %d repetitions after %d warm-up, configurations interleaved\n",
		cfg.Name, cfg.Architecture.ModelType, len(prompt), *gen, *reps, *warmup)
	if err := bench.Measure(runs, bench.Options{Prompt: prompt, Gen: *gen, Warmup: *warmup, Reps: *reps, Profile: profile}); err != nil {
		return err
	}
	printBenchTable(stdout, runs, vary)
	return nil
}

// benchConfigs is every combination of the comma-separated --backend,
// --spec and --arena-experts lists, and which of the three vary (the
// table's labels name only those).
func benchConfigs(backends, specs, arenas string) ([]bench.Config, map[string]bool, error) {
	var configs []bench.Config
	bs, ss, as := splitList(backends), splitList(specs), splitList(arenas)
	vary := map[string]bool{"backend": len(bs) > 1, "spec": len(ss) > 1, "arena": len(as) > 1}
	for _, b := range bs {
		if !slices.Contains(load.Backends, b) {
			return nil, nil, usagef("--backend: %q is not one of %s", b, strings.Join(load.Backends, ", "))
		}
		for _, s := range ss {
			sp, err := parseSpec(s)
			if err != nil {
				return nil, nil, err
			}
			for _, a := range as {
				n, err := strconv.Atoi(a)
				if err != nil || n < 0 {
					return nil, nil, usagef("--arena-experts: %q is not a number of experts ≥ 0", a)
				}
				configs = append(configs, bench.Config{Backend: b, Spec: sp.Depth, Arena: n})
			}
		}
	}
	return configs, vary, nil
}

// printBenchTable prints pp and tg (mean ± sd) per configuration, and tg as
// a ratio to the first.
func printBenchTable(stdout io.Writer, runs []*bench.Run, vary map[string]bool) {
	width := len("configuration")
	for _, r := range runs {
		width = max(width, len(benchLabel(r.Config, vary)))
	}
	fmt.Fprintf(stdout, "%-*s  %18s  %18s  %8s\n", width, "configuration", "pp tok/s", "tg tok/s", "tg ×base")
	_, base := runs[0].Speeds()
	for _, r := range runs {
		pp, tg := r.Speeds()
		fmt.Fprintf(stdout, "%-*s  %18s  %18s  %8.2f\n", width, benchLabel(r.Config, vary), plusMinus(pp), plusMinus(tg), tg.Mean/base.Mean)
	}
}

// benchPrompt is the given ids, or n pseudo-random ids below vocab.
func benchPrompt(ids string, n int, seed int64, vocab int) ([]int, error) {
	if ids != "" {
		p, err := parseTokens(ids)
		if err != nil {
			return nil, err
		}
		for i, t := range p {
			if t >= vocab {
				return nil, usagef("--tokens: item %d is %d, past the model's vocabulary of %d", i+1, t, vocab)
			}
		}
		return p, nil
	}
	return bench.RandomPrompt(n, seed, vocab), nil
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func plusMinus(s bench.Speed) string { return fmt.Sprintf("%.1f ± %.1f", s.Mean, s.SD) }
