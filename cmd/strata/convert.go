package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/pack"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

func init() {
	commands["convert"] = command{"convert an HF checkpoint to a quantized GGUF file", convertCmd}
}

const convertAbout = `
Converts an HF safetensors checkpoint (config.json + model.safetensors, or a
sharded index) into one GGUF file, quantizing each tensor class as --quant
says. The file uses llama.cpp's tensor names, metadata keys and value
transforms (norms +1, ssm_a = -exp(A_log)) of architecture qwen3next
(Qwen3-Next) or qwen4exp (Qwen3.8-Flash-Next: value heads in llama.cpp's
tiled order, the n-gram table as one tensor, per_layer_token_embd, with its
hash parameters in the metadata), and embeds the whole model config
(metadata strata.config), so "strata run --gguf FILE" needs nothing else.
The checkpoint's tokenizer.json, tokenizer_config.json (chat template, special
tokens) and generation_config.json (EOS ids) go in as llama.cpp's
tokenizer.ggml.* and tokenizer.chat_template keys, so -p and --chat work on
the GGUF and llama.cpp loads it.
Tensors are converted and written one at a time (routed experts one expert
at a time, the n-gram table in chunks of rows), so memory stays near the
size of the largest other tensor; the output appears only when complete.

--quant takes class=format items, comma-separated; classes not named keep the
checkpoint's precision (its dtype):
  trunk     attention, DeltaNet and shared-expert matrices
  router    the MoE routers (default: f16 under a quantized trunk, as
            llama.cpp's mixes keep ffn_gate_inp; else the trunk's format)
  experts   the routed experts (the bytes that stream from SSD)
  embed     the token embeddings and the n-gram table
  head      the output projection
  all       every class at once
  rows      the row policy (below; also --rows)
Formats: ` + "%s" + `. Norms, gates, conv taps and other small vectors stay f32,
as llama.cpp keeps them.

Rows that are not a whole number of blocks (Qwen3.8-Flash-Next's 640-wide
expert down rows under a 256-block format, tiny-go's 16-wide rows) are
stored in llama.cpp's fallback format, as llama-quantize does: the IQ types
-> iq4_nl, q2_k, q3_k -> q4_0, q4_k -> q5_0, q5_k -> q5_1, q6_k -> q8_0, and
f16 for rows that are not multiples of 32 (q8_0, q4_0, iq4_nl ... included).
That is --rows fallback (or rows=fallback in --quant), the default. --rows pad
zero-pads such rows to whole blocks instead, and smallest takes whichever is
smaller per tensor: the expert stays at the planned bits (Qwen3.8-Flash-Next's
iq2_xs expert is 1.52 MB padded, 1.87 MB with iq4_nl downs: less to stream
from SSD per token), but ggml requires whole blocks, so the file is strata's
only (llama.cpp refuses it) and a warning says so, naming the tensors.
A tensor written in another format than planned is named in a warning, and
a class that fell back as a whole is recorded in the embedded config (and
the summary's plan) as the format written.
--imatrix FILE gives the quantizers that take one (iq2_xs) the importance
matrix of strata imatrix or llama-imatrix (either file format): each weight's
error is weighted by its input column's mean x², per routed expert. As
llama-quantize does, a plan that writes iq2_xs without one is refused unless
--allow-no-imatrix (docs/imatrix.md: the measured difference).
For llama.cpp, also pass --no-mtp: llama.cpp has no Qwen3-Next or qwen4exp MTP
and refuses tensors it does not load.

Then run "strata pack FILE" to write FILE.experts, the routed experts laid
out for one read per expert.`

func convertCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("convert", "--hf DIR --quant PLAN -o FILE.gguf [--rows POLICY] [--no-mtp] [--imatrix F]", fmt.Sprintf(convertAbout, strings.Join(quant.Quantizable(), ", ")), stderr)
	hf := fs.String("hf", "", "HF checkpoint `directory` (config.json + safetensors)")
	plan := fs.String("quant", "", "quant `plan`, e.g. experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k (default: the checkpoint's dtype for every class)")
	rows := fs.String("rows", "", "`policy` for rows that are not whole blocks: fallback (the default: llama-quantize's formats), pad or smallest (strata-only files; same as rows= in --quant)")
	out := fs.String("o", "", "output GGUF `file`")
	name := fs.String("name", "", "model `name` recorded in the file (default: the checkpoint directory's name)")
	noMTP := fs.Bool("no-mtp", false, "leave the MTP head out (llama.cpp refuses tensors it does not load)")
	imPath := fs.String("imatrix", "", "importance matrix `file` (strata imatrix or llama-imatrix; GGUF or legacy .dat) for the quantizers that take one (iq2_xs)")
	allowNoIM := fs.Bool("allow-no-imatrix", false, "write iq2_xs without --imatrix (llama-quantize refuses; the quality is much worse, see docs/imatrix.md)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := checkModelPaths(*hf, ""); err != nil {
		return err
	}
	if *hf == "" || *out == "" {
		return usagef("--hf and -o are required")
	}
	if err := outfile.NotInput("-o", *out, *hf); err != nil {
		return err
	}
	cfgPath := filepath.Join(*hf, "config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return fmt.Errorf("--hf: reading the HF config: %w", err)
	}
	if *name == "" {
		*name = filepath.Base(filepath.Clean(*hf))
	}
	c, err := arch.ImportHF(data, models.ImportOptions{Name: *name, Source: cfgPath})
	if err != nil {
		return err
	}
	if err := applyPlan(c, *plan, *rows); err != nil {
		return err
	}
	ck, err := safetensors.OpenDir(*hf)
	if err != nil {
		return err
	}
	defer ck.Close()
	src := weights.NewHF(ck, c)
	if err := src.Check(c.Tensors()); err != nil {
		return err
	}
	textKV, err := textMetadata(*hf, c.Architecture.VocabSize, stderr)
	if err != nil {
		return err
	}
	opt := convert.Options{DropMTP: *noMTP, Metadata: textKV}
	if opt.Imatrix, err = imatrixFor(c, opt, *imPath, *allowNoIM, stderr); err != nil {
		return err
	}
	return writeGGUF(*out, c, src, opt, "convert", stdout, stderr)
}

// applyPlan applies --quant and --rows to c's quant plan.
func applyPlan(c *models.Config, plan, rows string) error {
	q, err := convert.ParsePlan(c.Quant, plan)
	if err != nil {
		return usagef("--quant: %v", err)
	}
	if rows != "" {
		p, err := quant.ParseRowPolicy(rows)
		if err != nil {
			return usagef("--rows: %v", err)
		}
		q.Rows = p.String()
	}
	c.Quant = q
	return nil
}

// writeGGUF runs a conversion with a progress bar and reports what it wrote.
func writeGGUF(out string, c *models.Config, src convert.Source, opt convert.Options, label string, stdout, stderr io.Writer) error {
	bar := newProgress(stderr, label)
	opt.Progress = bar.update
	rep, err := convert.Write(out, c, src, opt)
	bar.finish()
	if err != nil {
		return err
	}
	warnFallbacks(stderr, rep)
	if opt.Imatrix != nil {
		reportImatrix(stdout, stderr, rep)
	}
	var parts []string
	for f, n := range rep.ByFormat {
		parts = append(parts, fmt.Sprintf("%s %s", f, sizeOf(n)))
	}
	sort.Strings(parts)
	fmt.Fprintf(stdout, "wrote %s: %s, %d tensors, %s of tensor data (%s); plan %s\n", out, rep.Config.Name, rep.Tensors, sizeOf(rep.Bytes), strings.Join(parts, ", "), planSummary(rep))
	if rep.ExpertBytes > 0 {
		fmt.Fprintf(stdout, "one routed expert (gate+up+down): %d bytes\n", rep.ExpertBytes)
	}
	noteArtifact(stderr, out)
	if _, err := os.Stat(pack.Path(out)); err == nil {
		fmt.Fprintf(stderr, "note: %s belongs to the file this one replaced; run strata pack %s\n", pack.Path(out), out)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
