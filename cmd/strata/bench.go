package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-llm/strata/runtime/backend/metal"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/spec"
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

// benchConfig is one column of the comparison.
type benchConfig struct {
	backend string
	spec    string
	arena   int
}

func (c benchConfig) label(vary map[string]bool) string {
	var parts []string
	if vary["backend"] {
		parts = append(parts, "backend="+c.backend)
	}
	if vary["spec"] {
		parts = append(parts, "spec="+c.spec)
	}
	if vary["arena"] {
		parts = append(parts, "arena="+strconv.Itoa(c.arena))
	}
	if len(parts) == 0 {
		return fmt.Sprintf("backend=%s spec=%s arena=%d", c.backend, c.spec, c.arena)
	}
	return strings.Join(parts, " ")
}

// benchRun is a loaded configuration and its samples.
type benchRun struct {
	cfg    benchConfig
	l      *load.Loaded
	sp     engine.SpecOptions
	pp, tg []float64 // tokens/s per repetition
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
	var runs []*benchRun
	defer func() {
		for _, r := range runs {
			r.l.Close()
		}
	}()
	for _, c := range configs {
		opt := load.Options{PrefillRows: *prefill, ArenaExperts: c.arena, Backend: c.backend, History: "-",
			Stream: stream.Options{}, Metal: metal.Options{ICB: *icb}, Threads: *threads}
		sf.apply(&opt)
		opt.Note = noter(stderr)
		if c.arena > 0 {
			opt.ArenaGB = 0 // this configuration's --arena-experts value
		}
		r, err := openBenchRun(c, *arts, *hf, *ggufPath, opt, *suffix)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}

	cfg := runs[0].l.Config
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
	if err := measure(runs, prompt, *gen, *warmup, *reps, profile); err != nil {
		return err
	}
	printBenchTable(stdout, runs, vary)
	return nil
}

// benchConfigs is every combination of the comma-separated --backend,
// --spec and --arena-experts lists, and which of the three vary (the
// table's labels name only those).
func benchConfigs(backends, specs, arenas string) ([]benchConfig, map[string]bool, error) {
	var configs []benchConfig
	bs, ss, as := splitList(backends), splitList(specs), splitList(arenas)
	vary := map[string]bool{"backend": len(bs) > 1, "spec": len(ss) > 1, "arena": len(as) > 1}
	for _, b := range bs {
		if !slices.Contains(load.Backends, b) {
			return nil, nil, usagef("--backend: %q is not one of %s", b, strings.Join(load.Backends, ", "))
		}
		for _, s := range ss {
			if _, err := parseSpec(s); err != nil {
				return nil, nil, err
			}
			for _, a := range as {
				n, err := strconv.Atoi(a)
				if err != nil || n < 0 {
					return nil, nil, usagef("--arena-experts: %q is not a number of experts ≥ 0", a)
				}
				configs = append(configs, benchConfig{backend: b, spec: s, arena: n})
			}
		}
	}
	return configs, vary, nil
}

// openBenchRun loads the model for configuration c, with its speculation
// settings (an --spec auto gate kept across repetitions).
func openBenchRun(c benchConfig, arts artifactFlags, hf, ggufPath string, opt load.Options, suffix int) (*benchRun, error) {
	l, err := openModelIn(arts, hf, ggufPath, opt)
	if err != nil {
		return nil, fmt.Errorf("configuration %s: %w", c.label(nil), err)
	}
	sp, _ := parseSpec(c.spec)
	sp.SuffixDraft, sp.MTP = suffix, true
	if sp.Depth == engine.Auto {
		sp.Gate = spec.NewGate(l.Config.Windows.MaxDecodeRows - 1)
	}
	return &benchRun{cfg: c, l: l, sp: sp}, nil
}

// measure runs warmup and then reps repetitions of every configuration,
// interleaved (rotating which goes first), recording the measured ones; the
// CPU profile covers the measured repetitions only.
func measure(runs []*benchRun, prompt []int, gen, warmup, reps int, profile func() (func() error, error)) (err error) {
	var stopProfile func() error
	defer func() {
		if stopProfile != nil {
			if serr := stopProfile(); err == nil {
				err = serr
			}
		}
	}()
	for rep := 0; rep < warmup+reps; rep++ {
		if rep == warmup {
			if stopProfile, err = profile(); err != nil {
				return err
			}
		}
		for i := range runs {
			r := runs[(i+rep)%len(runs)]
			pp, tg, err := benchOnce(r, prompt, gen)
			if err != nil {
				return fmt.Errorf("configuration %s: %w", r.cfg.label(nil), err)
			}
			if rep >= warmup {
				r.pp, r.tg = append(r.pp, pp), append(r.tg, tg)
			}
		}
	}
	return nil
}

// printBenchTable prints pp and tg (mean ± sd) per configuration, and tg as
// a ratio to the first.
func printBenchTable(stdout io.Writer, runs []*benchRun, vary map[string]bool) {
	width := len("configuration")
	for _, r := range runs {
		width = max(width, len(r.cfg.label(vary)))
	}
	fmt.Fprintf(stdout, "%-*s  %18s  %18s  %8s\n", width, "configuration", "pp tok/s", "tg tok/s", "tg ×base")
	baseTG, _ := meanSD(runs[0].tg)
	for _, r := range runs {
		ppM, ppSD := meanSD(r.pp)
		tgM, tgSD := meanSD(r.tg)
		fmt.Fprintf(stdout, "%-*s  %18s  %18s  %8.2f\n", width, r.cfg.label(vary), plusMinus(ppM, ppSD), plusMinus(tgM, tgSD), tgM/baseTG)
	}
}

// benchOnce runs the prompt (pp, up to the first sampled token) and then
// gen tokens on a fresh session, returning tokens/s of each.
func benchOnce(r *benchRun, prompt []int, gen int) (pp, tg float64, err error) {
	s := r.l.Model.NewSession()
	start := time.Now()
	first, err := s.Generate(prompt, 1, engine.GenerateOptions{PrefillRows: r.l.PrefillRows})
	if err != nil {
		return 0, 0, err
	}
	pp = float64(len(prompt)) / time.Since(start).Seconds()
	start = time.Now()
	// The sampled token is fed as a one-row window, then gen−1 decode steps.
	out, err := s.Generate(first, gen, engine.GenerateOptions{PrefillRows: r.l.PrefillRows, Spec: r.sp})
	if err != nil {
		return 0, 0, err
	}
	return pp, float64(len(out)) / time.Since(start).Seconds(), nil
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
	x := uint64(seed)
	p := make([]int, n)
	for i := range p {
		x += 0x9e3779b97f4a7c15 // splitmix64
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		p[i] = int((z ^ z>>31) % uint64(vocab))
	}
	return p, nil
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

func meanSD(xs []float64) (mean, sd float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	for _, x := range xs {
		sd += (x - mean) * (x - mean)
	}
	if len(xs) > 1 {
		sd = math.Sqrt(sd / float64(len(xs)-1))
	}
	return mean, sd
}

func plusMinus(m, sd float64) string { return fmt.Sprintf("%.1f ± %.1f", m, sd) }
