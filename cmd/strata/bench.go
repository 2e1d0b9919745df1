package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend/cuda"
	"github.com/strata-llm/strata/runtime/backend/metal"
	"github.com/strata-llm/strata/runtime/bench"
	"github.com/strata-llm/strata/runtime/engine/sample"
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

// benchFlags are strata bench's flags, parsed.
type benchFlags struct {
	arts                    *artifactFlags
	hf, gguf, tokens        string
	backends, specs, arenas string
	promptLen, gen, reps    int
	warmup, repeat, prefill int
	suffix, threads, probe  int
	ioThreads               int
	seed                    int64
	temperature             float64
	icb, kernels            bool
	cudaDirect              func() bool
	stream                  *streamFlags
	profile                 func() (func() error, error)
}

func benchCmd(args []string, stdout, stderr io.Writer) error {
	f, err := parseBenchFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	configs, vary, err := benchConfigs(f.backends, f.specs, f.arenas)
	if err != nil {
		return err
	}
	runs, err := bench.Open(configs, f.suffix, func(c bench.Config) (*load.Loaded, error) {
		return openModelIn(*f.arts, f.hf, f.gguf, "", f.options(c, stderr))
	})
	if err != nil {
		return err
	}
	defer bench.Close(runs)

	cfg := runs[0].Loaded.Config
	prompt, err := f.prompt(cfg.Architecture.VocabSize)
	if err != nil {
		return err
	}
	if need := len(prompt) + f.gen; need > cfg.Runtime.ContextLength {
		return usagef("a prompt of %d tokens and %d generated need a context of %d, the model has %d", len(prompt), f.gen, need, cfg.Runtime.ContextLength)
	}
	fmt.Fprintf(stdout, "model %s (%s): prompt %d tokens, %d generated; %d repetitions after %d warm-up, configurations interleaved\n",
		cfg.Name, cfg.Architecture.ModelType, len(prompt), f.gen, f.reps, f.warmup)
	sp := sample.Params{Temperature: f.temperature, Seed: f.seed}
	if err := bench.Measure(runs, bench.Options{Prompt: prompt, Gen: f.gen, Warmup: f.warmup, Reps: f.reps, Profile: f.profile, Sampling: sp}); err != nil {
		return err
	}
	printBenchTable(stdout, runs, vary)
	printPrefillStreamTable(stdout, runs, vary)
	if err := printStreamTable(stdout, runs, vary, f.probe); err != nil {
		return err
	}
	if f.kernels {
		return printKernelProfiles(stdout, runs, vary, len(prompt))
	}
	return nil
}

// printKernelProfiles times the decode and prefill windows of every cuda
// configuration dispatch by dispatch (the state a run left, params of a
// window at position pos) and prints each window's per-family table beside
// the measured tg: the window's GPU time against the wall time of a token
// says how much of decoding is the host's.
func printKernelProfiles(stdout io.Writer, runs []*bench.Run, vary map[string]bool, pos int) error {
	for _, r := range runs {
		b, ok := r.Loaded.Model.Backend().(*cuda.Backend)
		if !ok {
			fmt.Fprintf(stdout, "\n%s: --kernel-profile times cuda windows only\n", benchLabel(r.Config, vary))
			continue
		}
		copyBW, err := b.CopyBandwidth(1<<30, 10)
		if err != nil {
			return err
		}
		_, tg := r.Speeds()
		fmt.Fprintf(stdout, "\n%s: %s; device-to-device copy %.0f GB/s (read + written); tg %.1f tok/s = %v a token\n",
			benchLabel(r.Config, vary), b.Info(), copyBW/1e9, tg.Mean, time.Duration(float64(time.Second)/tg.Mean).Round(time.Microsecond))
		ctx := r.Loaded.Config.Runtime.ContextLength
		for _, p := range b.Programs() {
			g := p.Graph
			if g.Kind != graph.KindTrunk || g.Rows != 1 && g.Rows != r.Loaded.PrefillRows {
				continue
			}
			if err := p.SetWindowParams(max(min(pos, ctx-g.Rows), 0)); err != nil {
				return err
			}
			wp, err := p.Profile(3, 10)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout)
			wp.Write(stdout, copyBW)
		}
	}
	return nil
}

// parseBenchFlags declares strata bench's flags and parses args.
func parseBenchFlags(args []string, stderr io.Writer) (*benchFlags, error) {
	fs := newFlagSet("bench", "[--hf DIR | --gguf FILE] [-p N] [-n N] [-r N] [--backend LIST] [--spec LIST] [--arena-experts LIST]", benchAbout, stderr)
	f := &benchFlags{arts: addArtifactsFlag(fs)}
	fs.StringVar(&f.hf, "hf", "", "HF checkpoint `directory`")
	fs.StringVar(&f.gguf, "gguf", "", "GGUF model `file` (experts through FILE.experts when present)")
	fs.IntVar(&f.promptLen, "p", 64, "prompt tokens (pp), pseudo-random from --seed unless --tokens is given")
	fs.IntVar(&f.gen, "n", 32, "generated tokens (tg)")
	fs.IntVar(&f.reps, "r", 3, "measured repetitions")
	fs.IntVar(&f.warmup, "warmup", 1, "unmeasured repetitions first (page faults, kernel builds)")
	fs.StringVar(&f.tokens, "tokens", "", "prompt token `ids`, comma-separated")
	fs.IntVar(&f.repeat, "repeat", 1, "repeat the prompt this many times (text where suffix drafts hit)")
	fs.Int64Var(&f.seed, "seed", 1, "seed of the pseudo-random prompt")
	fs.IntVar(&f.prefill, "prefill-rows", 0, "rows per prefill window (default: the model config's)")
	fs.StringVar(&f.backends, "backend", load.BackendCPU, "`backends` to compare, comma-separated: "+strings.Join(load.Backends, ", "))
	fs.StringVar(&f.specs, "spec", "0", "speculation `settings` to compare, comma-separated: auto or a number of drafts")
	fs.Float64Var(&f.temperature, "temperature", 0, "decode by sampling at this temperature (seeded by --seed, the same tokens every repetition) instead of greedily: a model of random weights (strata synth) decodes greedily into one repeated token whose experts never change; sampling keeps the routing moving, as text's does")
	fs.IntVar(&f.probe, "probe-experts", 256, "streamed configurations: after the runs, read this many experts from the pack as a miss is read (its reader, threads and part size; O_DIRECT where the run uses it) for the disk's raw rate and the tg it allows (0: no probe)")
	fs.StringVar(&f.arenas, "arena-experts", "0", "expert `arena sizes` to compare, comma-separated (0: every expert resident)")
	fs.IntVar(&f.suffix, "suffix-draft", 3, "most suffix drafts per window with --spec")
	f.profile = cpuProfileFlag(fs)
	fs.BoolVar(&f.icb, "icb", false, "metal backends: replay indirect command buffers (cuda replays CUDA graphs unless --icb=false, as strata run)")
	fs.BoolVar(&f.kernels, "kernel-profile", false, "cuda: after the runs, time the decode (T=1) and prefill windows dispatch by dispatch and print where their GPU time goes, per kernel")
	fs.IntVar(&f.threads, "threads", 0, "goroutines per cpu kernel (0: the model's runtime.threads, else one per core)")
	fs.IntVar(&f.ioThreads, "io-threads", 8, ioThreadsHelp)
	f.stream = addStreamFlags(fs)
	f.cudaDirect = cudaDirectFlag(fs, &f.icb)
	if err := parseFlags(fs, args); err != nil {
		return nil, err
	}
	return f, nil
}

// check refuses a mistake in the command line before anything is loaded
// (the configuration lists are checked by benchConfigs).
func (f *benchFlags) check() error {
	if err := checkThreads(f.threads); err != nil {
		return err
	}
	if f.ioThreads < 1 {
		return usagef("--io-threads must be ≥ 1, got %d", f.ioThreads)
	}
	if err := f.stream.check(0); err != nil {
		return err
	}
	if err := checkModelPaths(f.hf, f.gguf); err != nil {
		return err
	}
	if t := f.temperature; math.IsNaN(t) || t < 0 || math.IsInf(t, 0) {
		return usagef("--temperature must be a number ≥ 0, got %v", t)
	}
	if f.promptLen < 1 || f.gen < 1 || f.reps < 1 || f.warmup < 0 || f.repeat < 1 {
		return usagef("-p, -n, -r and --repeat must be ≥ 1 and --warmup ≥ 0, got %d, %d, %d, %d, %d", f.promptLen, f.gen, f.reps, f.repeat, f.warmup)
	}
	if f.hf != "" && f.gguf != "" {
		return usagef("--hf and --gguf are two models; give one")
	}
	return nil
}

// options are the load options of configuration c.
func (f *benchFlags) options(c bench.Config, stderr io.Writer) load.Options {
	opt := load.Options{PrefillRows: f.prefill, ArenaExperts: c.Arena, Backend: c.Backend, History: "-",
		Stream: stream.Options{Threads: f.ioThreads}, Metal: metal.Options{ICB: f.icb}, CUDA: cuda.Options{Direct: f.cudaDirect()}, Threads: f.threads}
	f.stream.apply(&opt)
	opt.Note = noter(stderr)
	if c.Arena > 0 {
		opt.ArenaGB = 0 // this configuration's --arena-experts value
	}
	return opt
}

// prompt is --tokens or the pseudo-random prompt, --repeat times.
func (f *benchFlags) prompt(vocab int) ([]int, error) {
	once, err := benchPrompt(f.tokens, f.promptLen, f.seed, vocab)
	if err != nil {
		return nil, err
	}
	var p []int
	for range f.repeat {
		p = append(p, once...)
	}
	return p, nil
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
	spec := false
	for _, r := range runs {
		width = max(width, len(benchLabel(r.Config, vary)))
		spec = spec || r.Config.Spec != 0
	}
	fmt.Fprintf(stdout, "%-*s  %18s  %18s  %8s", width, "configuration", "pp tok/s", "tg tok/s", "tg ×base")
	if spec {
		// What speculation did: drafts accepted of those fed, tokens per
		// decode window, and the MTP head's rows per token.
		fmt.Fprintf(stdout, "  %8s  %10s  %9s", "accepted", "tok/window", "MTP rows")
	}
	fmt.Fprintln(stdout)
	_, base := runs[0].Speeds()
	for _, r := range runs {
		pp, tg := r.Speeds()
		fmt.Fprintf(stdout, "%-*s  %18s  %18s  %8.2f", width, benchLabel(r.Config, vary), plusMinus(pp), plusMinus(tg), tg.Mean/base.Mean)
		if spec {
			st := r.Spec
			acc := "—"
			if st.Drafted > 0 {
				acc = fmt.Sprintf("%.1f%%", 100*float64(st.Accepted)/float64(st.Drafted))
			}
			tokens := st.Windows + st.Accepted
			perWindow, head := 0.0, 0.0
			if st.Windows > 0 {
				perWindow, head = float64(tokens)/float64(st.Windows), float64(st.HeadRows)/float64(tokens)
			}
			fmt.Fprintf(stdout, "  %8s  %10.2f  %9.2f", acc, perWindow, head)
		}
		fmt.Fprintln(stdout)
	}
	for _, r := range runs {
		if g := r.Gate(); g != nil {
			fmt.Fprintf(stdout, "%s: %s\n", benchLabel(r.Config, vary), g.Report())
		}
	}
}

// printStreamTable explains each streamed configuration's tg per token:
// experts routed (hits + misses), the misses read at the layer that needed
// them, bytes read, the time layers stalled on reads, the host points (the
// handshakes where the GPU waits for the host) and the host's time there
// beyond the stalls; then the disk's raw rate for expert reads, probed after
// the runs over probe experts with the same reader, and the tg that rate
// allows at the bytes read per token (the disk-bound limit).
func printStreamTable(stdout io.Writer, runs []*bench.Run, vary map[string]bool, probe int) error {
	var streamed []*bench.Run
	for _, r := range runs {
		if r.Loaded.ArenaExperts > 0 && r.TGTokens > 0 {
			streamed = append(streamed, r)
		}
	}
	if len(streamed) == 0 {
		return nil
	}
	fmt.Fprintf(stdout, "\nstreamed decoding, per generated token (tg of the measured repetitions):\n")
	fmt.Fprintf(stdout, "%-40s %7s %7s %7s %8s %9s %9s %7s %7s %10s %10s %9s %9s %6s\n", "configuration", "routed", "hits", "misses",
		"MB read", "prefetch", "stall ms", "waits", "ran on", "host ms", "disk GB/s", "tg tok/s", "limit", "of it")
	for _, r := range streamed {
		st, n := r.Stream, float64(r.TGTokens)
		per := func(x int) float64 { return float64(x) / n }
		ms := func(d time.Duration) float64 { return d.Seconds() * 1e3 / n }
		rate, limit, of := "—", "—", "—"
		_, tg := r.Speeds()
		if probe > 0 {
			p, ok, err := r.Loaded.Model.ProbeReads(probe)
			if err != nil {
				return fmt.Errorf("configuration %s: %w", r.Config, err)
			}
			if ok {
				rate = fmt.Sprintf("%.2f", p.Rate()/1e9)
				if bpt := float64(st.BytesRead) / n; bpt > 0 {
					lim := p.Rate() / bpt
					limit, of = fmt.Sprintf("%.1f", lim), fmt.Sprintf("%.2f", tg.Mean/lim)
				}
			}
		}
		fmt.Fprintf(stdout, "%-40s %7.1f %7.1f %7.1f %8.1f %9.1f %9.2f %7.1f %7.1f %10.2f %10s %9.1f %9s %6s\n", benchLabel(r.Config, vary)+fmt.Sprintf(" (%d slots)", r.Loaded.ArenaExperts),
			per(st.Hits+st.Misses), per(st.Hits), per(st.Misses), float64(st.BytesRead)/1e6/n, per(st.Prefetched),
			ms(st.Stall), per(st.HostPoints), per(st.RanOn), ms(st.HostTime-st.Stall), rate, tg.Mean, limit, of)
	}
	return nil
}

// printPrefillStreamTable gives each streamed configuration's reads per
// prompt (pp): experts routed (hits + misses, summed over windows and
// layers), the misses, bytes read, the time layers stalled on reads, and
// the rows a layer's routed experts ran for at once (layer-major batches:
// the prompt's rows, where a window's own experts see only its rows).
func printPrefillStreamTable(stdout io.Writer, runs []*bench.Run, vary map[string]bool) {
	var streamed []*bench.Run
	for _, r := range runs {
		if r.Loaded.ArenaExperts > 0 && r.Prompts > 0 {
			streamed = append(streamed, r)
		}
	}
	if len(streamed) == 0 {
		return
	}
	fmt.Fprintf(stdout, "\nstreamed prefill, per prompt (pp of the measured repetitions):\n")
	fmt.Fprintf(stdout, "%-40s %9s %9s %9s %9s %9s %10s %10s\n", "configuration", "routed", "hits", "misses", "MB read", "stall s", "rows/batch", "pp tok/s")
	for _, r := range streamed {
		st, n := r.PPStream, float64(r.Prompts)
		per := func(x int) float64 { return float64(x) / n }
		pp, _ := r.Speeds()
		batch := "-" // windows ran their own experts
		if st.Batches > 0 {
			batch = fmt.Sprintf("%.0f", float64(st.BatchRows)/float64(st.Batches))
		}
		fmt.Fprintf(stdout, "%-40s %9.0f %9.0f %9.0f %9.1f %9.2f %10s %10.1f\n", benchLabel(r.Config, vary)+fmt.Sprintf(" (%d slots)", r.Loaded.ArenaExperts),
			per(st.Hits+st.Misses), per(st.Hits), per(st.Misses), float64(st.BytesRead)/1e6/n, st.Stall.Seconds()/n, batch, pp.Mean)
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
