package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/strata-llm/strata/runtime/eval"
	strata "github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/safetensors"
	"github.com/strata-llm/strata/runtime/stream"
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
  strata perplexity --hf testdata/tiny-go --kl-base base.st -f text.go
  strata perplexity --gguf q4k.gguf --tokenizer testdata/tiny-go/tokenizer.json --kl-base base.st -f text.go`

// fileList is a repeatable -f.
type fileList []string

func (f *fileList) String() string     { return strings.Join(*f, ",") }
func (f *fileList) Set(v string) error { *f = append(*f, v); return nil }

func perplexityCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("perplexity", "[--hf DIR | --gguf FILE] -f FILE [FILE …] [--ctx N] [--kl-base F]", perplexityAbout, stderr)
	arts := addArtifactsFlag(fs)
	var files fileList
	fs.Var(&files, "f", "text `file` to score (repeat, or list more files after the flags: one document each)")
	hf := fs.String("hf", "", "HF checkpoint `directory` (default: the embedded tiny-go)")
	ggufPath := fs.String("gguf", "", "GGUF model `file` from strata convert")
	tokPath := fs.String("tokenizer", "", "tokenizer.json `file` (default: the --hf directory's, the GGUF's metadata, or the default model's)")
	ctx := fs.Int("ctx", 512, "tokens per window")
	batch := fs.Int("batch", 0, "rows fed per engine window (default: --ctx, one window; 1 feeds a token at a time, as decode does, which is what expert streaming sees)")
	first := fs.Int("first", -1, "score the tokens after this many of each window (default: --ctx/2, as llama-perplexity)")
	chunks := fs.Int("chunks", 0, "score this many windows (0: every whole window of the text)")
	spread := fs.Bool("spread", false, "space the --chunks windows evenly over the text (overlapping if need be) instead of taking the first ones")
	klBase := fs.String("kl-base", "", "base log-probabilities `file`: written when missing, compared with when present")
	mtp := fs.Bool("mtp", false, "also score the MTP head (teacher-forced, token t+2 given the true t+1)")
	backend := fs.String("backend", strata.BackendCPU, "what runs the window graphs: cpu, mslemu, metal or metal-emu")
	arena := fs.Int("arena-experts", 0, "stream the routed experts through an arena of this many experts (0: all resident)")
	ioThreads := fs.Int("io-threads", 8, "reader threads for expert streaming")
	moce := fs.Bool("moce", false, "cache-aware routing (MoCE) with the config's knobs, overridden by the next two")
	moceLambda := fs.Float64("moce-lambda", 0, "with --moce: the non-resident experts' probability scale λ (0: the config's)")
	moceMaxRank := fs.Int("moce-max-rank", 0, "with --moce: the deepest rank a resident expert may come from (0: the config's; -1: uncapped)")
	stats := fs.Bool("stats", false, "with --arena-experts: print expert streaming's hit rate, misses per token, and the LRU simulation's and Belady MIN's hit rates on the same access trace")
	history := fs.String("history", "", "with --arena-experts: the expert usage-history `file`, read at load to seed the arena and written back at the end (default: none)")
	pos, err := parseFlagsAnd(fs, args)
	if err != nil {
		return err
	}
	files = append(files, pos...)
	switch {
	case len(files) == 0:
		return usagef("no text: give -f FILE")
	case *hf != "" && *ggufPath != "":
		return usagef("--hf and --gguf are two models; give one")
	case *ctx < 2:
		return usagef("--ctx must be ≥ 2, got %d", *ctx)
	case *first >= *ctx-1:
		return usagef("--first must be < --ctx − 1 (%d), got %d", *ctx-1, *first)
	case *batch < 0:
		return usagef("--batch must be ≥ 1, got %d", *batch)
	case *chunks < 0:
		return usagef("--chunks must be ≥ 0, got %d", *chunks)
	case *spread && *chunks < 2:
		return usagef("--spread needs --chunks ≥ 2")
	case !slices.Contains(strata.Backends, *backend):
		return usagef("--backend is %q, expected one of %s", *backend, strings.Join(strata.Backends, ", "))
	case *arena < 0 || *ioThreads < 1:
		return usagef("--arena-experts must be ≥ 0 and --io-threads ≥ 1, got %d and %d", *arena, *ioThreads)
	case (*moceLambda != 0 || *moceMaxRank != 0) && !*moce:
		return usagef("--moce-lambda and --moce-max-rank tune --moce; add --moce")
	case *moceLambda < 0 || *moceLambda > 1:
		return usagef("--moce-lambda must be in (0, 1], got %v", *moceLambda)
	case *moceMaxRank < -1:
		return usagef("--moce-max-rank must be ≥ 1, 0 (the config's) or -1 (uncapped), got %d", *moceMaxRank)
	}
	if *first < 0 {
		*first = *ctx / 2
	}
	if *batch == 0 || *batch > *ctx {
		*batch = *ctx
	}
	tm, err := loadText(*tokPath, *hf, *ggufPath)
	if err != nil {
		return err
	}
	tok := tm.Tok
	if *history == "" {
		*history = "-"
	}
	opt := strata.HFOptions{PrefillRows: *batch, AllLogits: true, Context: max(*ctx, 0), ArenaExperts: *arena, History: *history,
		Stream: stream.Options{Threads: *ioThreads, Trace: *stats}, Backend: *backend, MoCE: *moce, MoCELambda: *moceLambda, MoCEMaxRank: *moceMaxRank,
		Warn: warner(stderr)}
	l, err := openModelIn(*arts, *hf, *ggufPath, opt)
	if err != nil {
		return err
	}
	defer l.Close()
	// The model's artifact may have shorter windows than asked for (its
	// prefill shape): the text is fed in those.
	*batch = min(*batch, l.PrefillRows)
	if *mtp && !l.Model.HasMTP() {
		return fmt.Errorf("--mtp: model %s has no MTP head", l.Config.Name)
	}
	tokens, err := readDocuments(tok, files, l.Config.Architecture.EOSTokenIDs[0])
	if err != nil {
		return err
	}
	starts, err := eval.Chunks(len(tokens), *ctx, *chunks, *spread)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(files, ", "), err)
	}
	key := windowsKey(tokens, starts, *ctx, *first)
	var base *safetensors.File
	var baseRows int
	saving := false
	if *klBase != "" {
		switch _, err := os.Stat(*klBase); {
		case errors.Is(err, os.ErrNotExist):
			saving = true
		case err != nil:
			return fmt.Errorf("--kl-base: %w", err)
		default:
			if base, baseRows, err = openBase(*klBase, key, l.Config.Architecture.VocabSize); err != nil {
				return err
			}
			defer base.Close()
		}
	}

	var sc, mtpSc eval.Scores
	var saved []byte
	start := time.Now()
	row := 0
	for i, s := range starts {
		w := tokens[s : s+*ctx]
		var trunk, heads [][]float32
		if *mtp {
			trunk, heads, err = l.Model.TeacherForced(w, *batch)
		} else {
			trunk, err = l.Model.TrunkForced(w, *batch)
		}
		if err != nil {
			return fmt.Errorf("window %d (tokens %d…%d): %w", i+1, s, s+*ctx-1, err)
		}
		for j := *first; j < *ctx-1; j++ {
			lp := eval.LogSoftmax(trunk[j])
			sc.Add(lp, w[j+1])
			if base != nil {
				b, err := baseRow(base, row, baseRows)
				if err != nil {
					return err
				}
				sc.AddBase(lp, b)
			}
			if saving {
				for _, v := range lp {
					saved = binary.LittleEndian.AppendUint32(saved, math.Float32bits(v))
				}
			}
			row++
			if *mtp && j < *ctx-2 {
				mtpSc.Add(eval.LogSoftmax(heads[j]), w[j+2])
			}
		}
		ppl, _ := sc.Perplexity()
		fmt.Fprintf(stderr, "[%d]%.4f,", i+1, ppl)
	}
	fmt.Fprintln(stderr)
	elapsed := time.Since(start)
	if saving {
		t := safetensors.Tensor{Name: "logprobs", DType: "F32", Shape: []int{row, l.Config.Architecture.VocabSize}, Data: saved}
		if err := safetensors.WriteFile(*klBase, []safetensors.Tensor{t}, map[string]string{"windows": key, "model": l.Config.Name}); err != nil {
			return fmt.Errorf("--kl-base: %w", err)
		}
	}

	ppl, se := sc.Perplexity()
	how := "the first"
	if *spread {
		how = "evenly spaced"
	}
	fmt.Fprintf(stdout, "%s: %d tokens of %d file(s); %d scored in %s %d windows of %d tokens (from position %d)\n",
		l.Config.Name, len(tokens), len(files), sc.N(), how, len(starts), *ctx, *first)
	fmt.Fprintf(stdout, "perplexity %.4f ± %.4f; mean NLL %.4f nats/token; top-1 %.2f%%\n", ppl, se, sc.MeanNLL(), 100*sc.Top1())
	if *mtp {
		mp, mse := mtpSc.Perplexity()
		fmt.Fprintf(stdout, "MTP head (token t+2): perplexity %.4f ± %.4f; mean NLL %.4f; top-1 (depth-1 draft acceptance) %.2f%%\n", mp, mse, mtpSc.MeanNLL(), 100*mtpSc.Top1())
	}
	if mean, p99, mx, same, ok := sc.KL(); ok {
		fmt.Fprintf(stdout, "KL divergence from %s: mean %.6f, p99 %.6f, max %.6f; same top token %.2f%%\n", *klBase, mean, p99, mx, 100*same)
	}
	if saving {
		fmt.Fprintf(stdout, "saved %d rows of log-probabilities to %s (the base for --kl-base)\n", row, *klBase)
	}
	fmt.Fprintf(stderr, "strata: %d windows in %v (%.1f tok/s)\n", len(starts), elapsed.Round(time.Millisecond), float64(len(starts)**ctx)/elapsed.Seconds())
	if *stats && *arena > 0 {
		ss, trace := l.Model.StreamStats(), l.Model.StreamTrace()
		n := float64(max(len(trace), 1))
		distinct := map[int]bool{}
		for _, k := range trace {
			distinct[k] = true
		}
		fmt.Fprintf(stdout, "streaming: arena of %d experts; hit rate %.4f (LRU simulation %.4f, Belady MIN %.4f, compulsory-miss bound %.4f over %d accesses); %.3f misses per token\n",
			*arena, float64(ss.Hits+ss.Late)/n, float64(stream.LRUHits(trace, *arena))/n, float64(stream.BeladyHits(trace, *arena))/n,
			1-float64(len(distinct))/n, len(trace), float64(ss.Misses)/float64(len(starts)**ctx))
	}
	return nil
}

// windowsKey identifies what a base file scored: the tokens and windows.
func windowsKey(tokens, starts []int, ctx, first int) string {
	h := sha256.New()
	for _, t := range tokens {
		h.Write(binary.LittleEndian.AppendUint32(nil, uint32(t)))
	}
	var s []string
	for _, v := range starts {
		s = append(s, strconv.Itoa(v))
	}
	sum := h.Sum(nil)
	h.Reset()
	h.Write([]byte(strings.Join(s, ",")))
	return fmt.Sprintf("tokens=%d sha256=%s ctx=%d first=%d starts=%s", len(tokens), hex.EncodeToString(sum[:8]), ctx, first, hex.EncodeToString(h.Sum(nil)[:8]))
}

func openBase(path, key string, vocab int) (*safetensors.File, int, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("--kl-base: %w", err)
	}
	t, ok := f.Tensor("logprobs")
	if !ok || t.DType != "F32" || len(t.Shape) != 2 || t.Shape[1] != vocab {
		f.Close()
		return nil, 0, fmt.Errorf("--kl-base %s: expected tensor logprobs F32 [rows, %d] written by strata perplexity", path, vocab)
	}
	if got := f.Metadata()["windows"]; got != key {
		f.Close()
		return nil, 0, fmt.Errorf("--kl-base %s scored other text or windows (%s), not this run's (%s)", path, got, key)
	}
	return f, t.Shape[0], nil
}

func baseRow(f *safetensors.File, row, rows int) ([]float32, error) {
	if row >= rows {
		return nil, fmt.Errorf("--kl-base has %d rows; this run scores more", rows)
	}
	t, _ := f.Tensor("logprobs")
	n := t.Shape[1]
	out := make([]float32, n)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*(row*n+i):]))
	}
	return out, nil
}
