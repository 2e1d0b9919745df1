package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/eval"
	"github.com/strata-llm/strata/runtime/load"
)

func init() {
	commands["perplexity"] = command{"score a model on text: perplexity ± its error, top-1, KL vs a base model (as llama-perplexity)", perplexityCmd}
}

const perplexityAbout = `
Scores a model on text as llama.cpp's llama-perplexity does. The text is
tokenized with the model's tokenizer (several files: each one a document
followed by the end-of-text token, as the model was trained), cut into
windows of --ctx tokens, and each window is fed from a fresh state; the
tokens after the first --first of a window are scored against the logits of
the position before them. It prints the running perplexity per window to
stderr and the totals to stdout: perplexity ± its standard error, the mean
negative log-likelihood and top-1 accuracy (argmax = the next token). With
--mtp, the MTP head is scored too, teacher-forced (its argmax is the token
after next: the acceptance of a depth-1 draft).

--kl-base FILE compares distributions: when FILE does not exist, this run's
log-probabilities of every scored position are saved to it (f32; 32 KiB per
token at vocab 8192); when it exists, this run is compared with it (same text,
windows and tokens, else refused): KL(base ‖ this) mean, 99th percentile and
max, and the share of positions whose top token is the base's.

Examples:
  # tiny-go on held-out Go: the 64 evenly spaced 513-token windows of train.py's evaluation
  strata perplexity --ctx 513 --first 0 --chunks 64 --spread -f a.go -f b.go
  # a quantized model against bf16
  strata perplexity --hf models/tiny-go --kl-base base.st -f text.go
  strata perplexity --gguf q4k.gguf --tokenizer models/tiny-go/tokenizer.json --kl-base base.st -f text.go`

// fileList is a repeatable -f.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

// perplexityFlags are strata perplexity's flags, parsed.
type perplexityFlags struct {
	model                 *modelFlags
	files                 fileList
	tokPath, klBase, hist string
	ctx, batch, first     int
	chunks, moceMaxRank   int
	moceLambda            float64
	spread, mtp, moce     bool
	stats                 bool
}

func perplexityCmd(args []string, stdout, stderr io.Writer) error {
	f, err := parsePerplexityFlags(args, stderr)
	if err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	tm, err := loadText(f.tokPath, f.model.hf, f.model.gguf)
	if err != nil {
		return err
	}
	l, err := f.model.open(f.options(stderr))
	if err != nil {
		return err
	}
	defer l.Close()
	// The model's artifact may have shorter windows than asked for (its
	// prefill shape): the text is fed in those.
	f.batch = min(f.batch, l.PrefillRows)
	if f.mtp && !l.Model.HasMTP() {
		return fmt.Errorf("--mtp: model %s has no MTP head", l.Config.Name)
	}
	tokens, err := readDocuments(tm, l.Config, f.files)
	if err != nil {
		return err
	}
	starts, err := eval.Chunks(len(tokens), f.ctx, f.chunks, f.spread)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(f.files, ", "), err)
	}
	kl, err := f.openBase(eval.WindowsKey(tokens, starts, f.ctx, f.first), l.Config.Architecture.VocabSize)
	if err != nil {
		return err
	}
	defer kl.Close()

	start := time.Now()
	sc, mtpSc, err := f.score(l, tokens, starts, kl, stderr)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if kl != nil {
		if err := kl.Save(l.Config.Name); err != nil {
			return fmt.Errorf("--kl-base: %w", err)
		}
	}
	f.report(stdout, l, len(tokens), len(starts), sc, mtpSc, kl)
	fmt.Fprintf(stderr, "strata: %d windows in %v (%.1f tok/s)\n", len(starts), elapsed.Round(time.Millisecond), float64(len(starts)*f.ctx)/elapsed.Seconds())
	if f.stats && f.model.arena > 0 {
		printArenaHits(stdout, eval.Arena(l.Model.StreamStats(), l.Model.StreamTrace(), f.model.arena, len(starts)*f.ctx))
	}
	return nil
}

// parsePerplexityFlags declares strata perplexity's flags and parses args;
// the text files listed after the flags join -f's.
func parsePerplexityFlags(args []string, stderr io.Writer) (*perplexityFlags, error) {
	fs := newFlagSet("perplexity", "[--hf DIR | --gguf FILE] -f FILE [FILE …] [--ctx N] [--kl-base F]", perplexityAbout, stderr)
	f := &perplexityFlags{model: addModelFlags(fs, backendFlag|streamingFlags)}
	fs.Var(&f.files, "f", "text `file` to score (repeat, or list more files after the flags: one document each)")
	fs.StringVar(&f.tokPath, "tokenizer", "", "tokenizer.json `file` (default: the --hf directory's, the GGUF's metadata, or the default model's)")
	fs.IntVar(&f.ctx, "ctx", 512, "tokens per window")
	fs.IntVar(&f.batch, "batch", 0, "rows fed per engine window (default: --ctx, one window; 1 feeds a token at a time, as decode does, which is what expert streaming sees)")
	fs.IntVar(&f.first, "first", -1, "score the tokens after this many of each window (default: --ctx/2, as llama-perplexity)")
	fs.IntVar(&f.chunks, "chunks", 0, "score this many windows (0: every whole window of the text)")
	fs.BoolVar(&f.spread, "spread", false, "space the --chunks windows evenly over the text (overlapping if need be) instead of taking the first ones")
	fs.StringVar(&f.klBase, "kl-base", "", "base log-probabilities `file`: written when missing, compared with when present")
	fs.BoolVar(&f.mtp, "mtp", false, "also score the MTP head (teacher-forced, token t+2 given the true t+1)")
	fs.BoolVar(&f.moce, "moce", false, "cache-aware routing (MoCE) with the config's knobs, overridden by the next two")
	fs.Float64Var(&f.moceLambda, "moce-lambda", 0, "with --moce: the non-resident experts' probability scale λ (0: the config's)")
	fs.IntVar(&f.moceMaxRank, "moce-max-rank", 0, "with --moce: the deepest rank a resident expert may come from (0: the config's; -1: uncapped)")
	fs.BoolVar(&f.stats, "stats", false, "with --arena-experts: print expert streaming's hit rate, misses per token, and the LRU simulation's and Belady MIN's hit rates on the same access trace")
	fs.StringVar(&f.hist, "history", "", "with --arena-experts: the expert usage-history `file`, read at load to seed the arena and written back at the end (default: none)")
	pos, err := parseFlagsAnd(fs, args)
	if err != nil {
		return nil, err
	}
	f.files = append(f.files, pos...)
	return f, nil
}

// check validates the flags and fills in the defaults that follow --ctx.
func (f *perplexityFlags) check() error {
	if len(f.files) == 0 {
		return usagef("no text: give -f FILE")
	}
	if err := f.model.check(); err != nil {
		return err
	}
	switch {
	case f.ctx < 2:
		return usagef("--ctx must be ≥ 2, got %d", f.ctx)
	case f.first >= f.ctx-1:
		return usagef("--first must be < --ctx − 1 (%d), got %d", f.ctx-1, f.first)
	case f.batch < 0:
		return usagef("--batch must be ≥ 1, got %d", f.batch)
	case f.chunks < 0:
		return usagef("--chunks must be ≥ 0, got %d", f.chunks)
	case f.spread && f.chunks < 2:
		return usagef("--spread needs --chunks ≥ 2")
	case (f.moceLambda != 0 || f.moceMaxRank != 0) && !f.moce:
		return usagef("--moce-lambda and --moce-max-rank tune --moce; add --moce")
	case f.moceLambda < 0 || f.moceLambda > 1:
		return usagef("--moce-lambda must be in (0, 1], got %v", f.moceLambda)
	case f.moceMaxRank < -1:
		return usagef("--moce-max-rank must be ≥ 1, 0 (the config's) or -1 (uncapped), got %d", f.moceMaxRank)
	}
	if f.first < 0 {
		f.first = f.ctx / 2
	}
	if f.batch == 0 || f.batch > f.ctx {
		f.batch = f.ctx
	}
	return nil
}

// options are the load options the flags ask for: every position's logits,
// windows of --batch rows and a context of --ctx.
func (f *perplexityFlags) options(stderr io.Writer) load.Options {
	hist := f.hist
	if hist == "" {
		hist = "-"
	}
	return load.Options{PrefillRows: f.batch, AllLogits: true, Context: max(f.ctx, 0), History: hist,
		Stream: stream.Options{Trace: f.stats}, MoCE: f.moce, MoCELambda: f.moceLambda, MoCEMaxRank: f.moceMaxRank,
		Warn: warner(stderr)}
}

// score runs eval.Perplexity over the windows, comparing with or saving
// to the base, and prints the running perplexity after each window.
func (f *perplexityFlags) score(l *load.Loaded, tokens, starts []int, kl *eval.KLBase, stderr io.Writer) (sc, mtpSc eval.Scores, err error) {
	sc, mtpSc, err = eval.Perplexity(l.Model, tokens, starts, eval.Options{Ctx: f.ctx, First: f.first, Rows: f.batch, MTP: f.mtp, Base: kl,
		Window: func(n int, sc *eval.Scores) {
			ppl, _ := sc.Perplexity()
			fmt.Fprintf(stderr, "[%d]%.4f,", n, ppl)
		}})
	fmt.Fprintln(stderr)
	return sc, mtpSc, err
}

// report prints the totals: what was scored, the perplexity, the MTP
// head's, the KL divergence from the base or where the base was saved.
func (f *perplexityFlags) report(stdout io.Writer, l *load.Loaded, tokens, windows int, sc, mtpSc eval.Scores, kl *eval.KLBase) {
	ppl, se := sc.Perplexity()
	how := "the first"
	if f.spread {
		how = "evenly spaced"
	}
	fmt.Fprintf(stdout, "%s: %d tokens of %d file(s); %d scored in %s %d windows of %d tokens (from position %d)\n",
		l.Config.Name, tokens, len(f.files), sc.N(), how, windows, f.ctx, f.first)
	fmt.Fprintf(stdout, "perplexity %.4f ± %.4f; mean NLL %.4f nats/token; top-1 %.2f%%\n", ppl, se, sc.MeanNLL(), 100*sc.Top1())
	if f.mtp {
		mp, mse := mtpSc.Perplexity()
		fmt.Fprintf(stdout, "MTP head (token t+2): perplexity %.4f ± %.4f; mean NLL %.4f; top-1 (depth-1 draft acceptance) %.2f%%\n", mp, mse, mtpSc.MeanNLL(), 100*mtpSc.Top1())
	}
	if mean, p99, mx, same, ok := sc.KL(); ok {
		fmt.Fprintf(stdout, "KL divergence from %s: mean %.6f, p99 %.6f, max %.6f; same top token %.2f%%\n", kl.Path(), mean, p99, mx, 100*same)
	}
	if kl != nil && kl.Saving() {
		fmt.Fprintf(stdout, "saved %d rows of log-probabilities to %s (the base for --kl-base)\n", kl.Rows(), kl.Path())
	}
}

// openBase opens --kl-base (nil without it): the base compared with, or
// the one this run saves.
func (f *perplexityFlags) openBase(key string, vocab int) (*eval.KLBase, error) {
	if f.klBase == "" {
		return nil, nil
	}
	kl, err := eval.OpenKLBase(f.klBase, key, vocab)
	if err != nil {
		return nil, fmt.Errorf("--kl-base: %w", err)
	}
	return kl, nil
}

// printArenaHits prints --stats' streaming line: the arena's hit rate
// against an LRU cache's and Belady MIN's on the same access trace, and the
// misses per token fed.
func printArenaHits(stdout io.Writer, h eval.ArenaHits) {
	fmt.Fprintf(stdout, "streaming: arena of %d experts; hit rate %.4f (LRU simulation %.4f, Belady MIN %.4f, compulsory-miss bound %.4f over %d accesses); %.3f misses per token\n",
		h.Arena, h.Hit, h.LRU, h.Belady, h.Compulsory, h.Accesses, h.MissesPerToken)
}
