package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/convert"
	"github.com/strata-llm/strata/runtime/cpu"
	"github.com/strata-llm/strata/runtime/eval"
	"github.com/strata-llm/strata/runtime/imatrix"
	strata "github.com/strata-llm/strata/runtime/load"
)

func init() {
	commands["imatrix"] = command{"collect an importance matrix (activation statistics) over a text, as llama-imatrix", imatrixCmd}
}

const imatrixAbout = `
Runs the model over a text, as strata perplexity does (the text tokenized,
cut into windows of --ctx tokens, each fed from a fresh state), and sums for
every weight matrix the squares of the activations that enter each of its
input columns, per routed expert for the expert tensors: llama.cpp's
importance matrix. strata convert --imatrix and llama-quantize --imatrix
use it to spend the low-bit formats' precision on the columns that carry
large activations.

The file is llama.cpp's: the GGUF-based imatrix (NAME.in_sum2 and
NAME.counts tensors) unless the name ends in .dat, then the legacy binary
format. Tensors are named as in the GGUF (blk.N.ffn_down_exps.weight …),
so either tool's matrix serves both. The statistics are collected on the
cpu backend. Use text like the model's use, not the text you evaluate on.

Examples:
  strata imatrix --hf testdata/tiny-go --ctx 512 --chunks 16 -f calib.go -o tiny-go.imatrix
  strata convert --hf testdata/tiny-go --quant all=q8_0,experts=iq2_xs --imatrix tiny-go.imatrix -o iq2.gguf`

func imatrixCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("imatrix", "[--hf DIR | --gguf FILE] -f FILE [FILE …] -o OUT [--ctx N] [--chunks N]", imatrixAbout, stderr)
	arts := addArtifactsFlag(fs)
	var files fileList
	fs.Var(&files, "f", "text `file` to run over (repeat, or list more files after the flags: one document each)")
	hf := fs.String("hf", "", "HF checkpoint `directory` (default: the embedded tiny-go)")
	ggufPath := fs.String("gguf", "", "GGUF model `file` from strata convert")
	tokPath := fs.String("tokenizer", "", "tokenizer.json `file` (default: the --hf directory's, the GGUF's metadata, or the default model's)")
	out := fs.String("o", "", "output `file`: llama.cpp's GGUF imatrix, or the legacy format when it ends in .dat")
	ctx := fs.Int("ctx", 512, "tokens per window")
	chunks := fs.Int("chunks", 0, "use this many windows (0: every whole window of the text)")
	pos, err := parseFlagsAnd(fs, args)
	if err != nil {
		return err
	}
	files = append(files, pos...)
	switch {
	case len(files) == 0:
		return usagef("no text: give -f FILE")
	case *out == "":
		return usagef("no output: give -o FILE")
	case *hf != "" && *ggufPath != "":
		return usagef("--hf and --gguf are two models; give one")
	case *ctx < 2:
		return usagef("--ctx must be ≥ 2, got %d", *ctx)
	case *chunks < 0:
		return usagef("--chunks must be ≥ 0, got %d", *chunks)
	}
	inputs := append([]string{*ggufPath, *hf}, files...)
	if err := outfile.NotInput("-o", *out, inputs...); err != nil {
		return err
	}
	tm, err := loadText(*tokPath, *hf, *ggufPath)
	if err != nil {
		return err
	}
	opt := strata.HFOptions{PrefillRows: *ctx, AllLogits: true, Context: *ctx, History: "-", Backend: strata.BackendCPU,
		Warn: warner(stderr)}
	l, err := openModelIn(*arts, *hf, *ggufPath, opt)
	if err != nil {
		return err
	}
	defer l.Close()
	targets, err := convert.ImatrixTargets(l.Config, convert.Options{})
	if err != nil {
		return fmt.Errorf("naming the tensors as the GGUF does: %w", err)
	}
	tokens, err := readDocuments(tm.Tok, files, l.Config.Architecture.EOSTokenIDs[0])
	if err != nil {
		return err
	}
	starts, err := eval.Chunks(len(tokens), *ctx, *chunks, false)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(files, ", "), err)
	}
	col := imatrix.NewCollector()
	prev := cpu.SetObserver(col)
	defer cpu.SetObserver(prev)
	start := time.Now()
	for i, s := range starts {
		w := tokens[s : s+*ctx]
		var err error
		if l.Model.HasMTP() {
			_, _, err = l.Model.TeacherForced(w, l.PrefillRows) // the MTP head's experts too
		} else {
			_, err = l.Model.TrunkForced(w, l.PrefillRows)
		}
		if err != nil {
			return fmt.Errorf("window %d (tokens %d…%d): %w", i+1, s, s+*ctx-1, err)
		}
		fmt.Fprintf(stderr, "[%d/%d]", i+1, len(starts))
	}
	fmt.Fprintln(stderr)
	cpu.SetObserver(prev)
	var unnamed []string
	m, err := col.Matrix(func(t string) []imatrix.Target {
		tg, ok := targets[t]
		if !ok {
			unnamed = append(unnamed, t)
		}
		return tg
	})
	if err != nil {
		return err
	}
	if len(m.Entries) == 0 {
		return fmt.Errorf("no weight matrix saw an activation (is the model's backend cpu?)")
	}
	sort.Strings(unnamed)
	if len(unnamed) > 0 {
		fmt.Fprintf(stderr, "strata: note: %d engine tensors have no GGUF tensor and are left out: %s\n", len(unnamed), strings.Join(unnamed, ", "))
	}
	for _, f := range files {
		m.Datasets = append(m.Datasets, filepath.Base(f))
	}
	m.ChunkCount, m.ChunkSize = len(starts), *ctx
	if err := imatrix.Write(*out, m); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors from %d windows of %d tokens (%d tokens of text) in %v\n",
		*out, len(m.Entries), len(starts), *ctx, len(tokens), time.Since(start).Round(time.Millisecond))
	return nil
}

// imatrixFor reads --imatrix, or refuses a plan that needs one (unless
// allowed, then warns).
func imatrixFor(c *models.Config, opt convert.Options, path string, allow bool, stderr io.Writer) (*imatrix.Matrix, error) {
	if path != "" {
		m, err := imatrix.Read(path)
		if err != nil {
			return nil, fmt.Errorf("--imatrix: %w", err)
		}
		return m, nil
	}
	need, err := convert.NeedsImatrix(c, opt)
	if err != nil || len(need) == 0 {
		return nil, err
	}
	if !allow {
		return nil, usagef("%d tensors (%s, …) would be written as a 2-bit format without an importance matrix, which llama-quantize refuses; make one with strata imatrix and pass --imatrix FILE, or pass --allow-no-imatrix", len(need), need[0])
	}
	fmt.Fprintf(stderr, "strata: warning: %d tensors written as 2-bit without an importance matrix (--allow-no-imatrix); expect a much worse model\n", len(need))
	return nil, nil
}

// reportImatrix says which tensors the importance matrix weighted, and
// warns of those in a weighted format it did not reach.
func reportImatrix(stdout, stderr io.Writer, rep *convert.Report) {
	fmt.Fprintf(stdout, "imatrix: %d tensors quantized with importance weights\n", len(rep.Weighted))
	if n := len(rep.Unweighted); n > 0 {
		fmt.Fprintf(stderr, "strata: warning: %d tensors in a format that takes an imatrix were quantized without one (not in the matrix): %s\n", n, strings.Join(rep.Unweighted, ", "))
	}
}
