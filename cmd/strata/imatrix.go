package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/calibrate"
	"github.com/strata-llm/strata/runtime/eval"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/tools/imatrix"
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
  strata imatrix --hf models/tiny-go --ctx 512 --chunks 16 -f calib.go -o tiny-go.imatrix
  strata convert --hf models/tiny-go --quant all=q8_0,experts=iq2_xs --imatrix tiny-go.imatrix -o iq2.gguf`

// imatrixFlags are strata imatrix's flags, parsed.
type imatrixFlags struct {
	model        *modelFlags
	files        fileList
	tokPath, out string
	ctx, chunks  int
}

func imatrixCmd(args []string, stdout, stderr io.Writer) error {
	f, err := parseImatrixFlags(args, stderr)
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
	tokens, err := readDocuments(tm, l.Config, f.files)
	if err != nil {
		return err
	}
	starts, err := eval.Chunks(len(tokens), f.ctx, f.chunks, false)
	if err != nil {
		return fmt.Errorf("%s: %w", strings.Join(f.files, ", "), err)
	}
	start := time.Now()
	m, unnamed, err := calibrate.Imatrix(l.Model, tokens, starts, calibrate.Options{Ctx: f.ctx, Rows: l.PrefillRows, Files: f.files,
		Window: func(n, windows int) { fmt.Fprintf(stderr, "[%d/%d]", n, windows) }})
	fmt.Fprintln(stderr)
	if err != nil {
		return err
	}
	if len(unnamed) > 0 {
		fmt.Fprintf(stderr, "strata: note: %d engine tensors have no GGUF tensor and are left out: %s\n", len(unnamed), strings.Join(unnamed, ", "))
	}
	if err := imatrix.Write(f.out, m); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %d tensors from %d windows of %d tokens (%d tokens of text) in %v\n",
		f.out, len(m.Entries), len(starts), f.ctx, len(tokens), time.Since(start).Round(time.Millisecond))
	return nil
}

// parseImatrixFlags declares strata imatrix's flags and parses args; the
// text files listed after the flags join -f's.
func parseImatrixFlags(args []string, stderr io.Writer) (*imatrixFlags, error) {
	fs := newFlagSet("imatrix", "[--hf DIR | --gguf FILE] -f FILE [FILE …] -o OUT [--ctx N] [--chunks N]", imatrixAbout, stderr)
	f := &imatrixFlags{model: addModelFlags(fs, 0)} // the statistics come from the cpu kernels
	fs.Var(&f.files, "f", "text `file` to run over (repeat, or list more files after the flags: one document each)")
	fs.StringVar(&f.tokPath, "tokenizer", "", "tokenizer.json `file` (default: the --hf directory's, the GGUF's metadata, or the default model's)")
	fs.StringVar(&f.out, "o", "", "output `file`: llama.cpp's GGUF imatrix, or the legacy format when it ends in .dat")
	fs.IntVar(&f.ctx, "ctx", 512, "tokens per window")
	fs.IntVar(&f.chunks, "chunks", 0, "use this many windows (0: every whole window of the text)")
	pos, err := parseFlagsAnd(fs, args)
	if err != nil {
		return nil, err
	}
	f.files = append(f.files, pos...)
	return f, nil
}

// check validates the flags and refuses an -o that is one of the inputs.
func (f *imatrixFlags) check() error {
	switch {
	case len(f.files) == 0:
		return usagef("no text: give -f FILE")
	case f.out == "":
		return usagef("no output: give -o FILE")
	}
	if err := f.model.check(); err != nil {
		return err
	}
	switch {
	case f.ctx < 2:
		return usagef("--ctx must be ≥ 2, got %d", f.ctx)
	case f.chunks < 0:
		return usagef("--chunks must be ≥ 0, got %d", f.chunks)
	}
	return outfile.NotInput("-o", f.out, append([]string{f.model.gguf, f.model.hf}, f.files...)...)
}

// options are the load options: windows of --ctx rows on the cpu backend,
// whose kernels report the activations.
func (f *imatrixFlags) options(stderr io.Writer) load.Options {
	return load.Options{PrefillRows: f.ctx, AllLogits: true, Context: f.ctx, History: "-", Backend: load.BackendCPU,
		Warn: warner(stderr)}
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
