package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

func init() {
	commands["synth"] = command{"write a random-weight GGUF of any configured model size", synthCmd}
}

const synthAbout = `
Writes a GGUF file of random weights with the shapes of a configured model,
in the formats --quant asks for, for benchmarks at real sizes (expert counts,
expert bytes, pack sizes) without downloading a checkpoint. The file is what
"strata convert" would write (names, metadata, embedded config), so "strata
pack" and "strata run --gguf" take it. Weights are N(0, 0.02²) noise,
deterministic for a --seed; quantized tensors are filled from a pool of
really quantized noise blocks, so even 2-bit experts are written at disk
speed.

--layers, --experts and --top-k shrink the model (the first N layers of its
layer pattern, the first N experts) to fit a benchmark's disk and time.

A model with PLE layers (Qwen3.8-Flash-Next) gets a random n-gram table too,
generated row by row while it is written (each row from its own seed, in the
embed class's format). The real table has 320M rows (51B parameters), so
--ngram-base shrinks it by default: the per-head primes start above 4096
instead of 20,000,000 (~65K rows); the embedded config says so, and the
hashing follows it. --ngram-base 0 keeps the model's own table size.

Example: 2 layers of Qwen3-Next-80B at 512 experts top-10 with IQ2_XS experts
and its MTP layer: a 2.1 GB GGUF and a 1.4 GB pack (3 MoE layers × 512
experts × 917,504 bytes); with --no-mtp 1.6 GB and 0.94 GB. Without --quant
the model's bf16 plan writes ~7.8 GB (with --no-mtp) and takes minutes:
  strata synth --model qwen3-next-80b-a3b --layers 2 \
    --quant experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k -o synth.gguf
  strata pack synth.gguf`

func synthCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("synth", "--model NAME -o FILE.gguf [--quant PLAN] [--layers N] [--experts N] [--top-k K] [--ngram-base B] [--seed S] [--vocab]", fmt.Sprintf("%s\n\nModels: %s. Formats: %s.", synthAbout, strings.Join(models.EmbeddedNames(), ", "), strings.Join(quant.Quantizable(), ", ")), stderr)
	model := fs.String("model", "", "model `name` (a folder under models/) or a model.toml path")
	out := fs.String("o", "", "output GGUF `file`")
	plan := fs.String("quant", "", "quant `plan` as in strata convert (default: the model config's [quant])")
	rows := fs.String("rows", "", "`policy` for rows that are not whole blocks: fallback (the default), pad or smallest (strata-only files; see convert --help)")
	layers := fs.Int("layers", 0, "keep only the first `N` layers (0: all)")
	experts := fs.Int("experts", 0, "routed experts per layer (0: the model's)")
	topK := fs.Int("top-k", 0, "experts per token (0: the model's, capped at --experts)")
	seed := fs.Uint64("seed", 1, "random `seed`")
	noMTP := fs.Bool("no-mtp", false, "leave the MTP head out")
	vocab := fs.Bool("vocab", false, "write a placeholder vocabulary as wide as the embedding (SentencePiece-style token list, scores and types, no real tokenizer) so llama.cpp loads the file; strata runs it from token ids")
	ngramBase := fs.Int("ngram-base", 4096, "n-gram table size: per-head primes start above `B` (at most the model's ngram_vocab_size_base; 0: the model's)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" || *out == "" {
		return usagef("--model and -o are required")
	}
	if *layers < 0 || *experts < 0 || *topK < 0 || *ngramBase < 0 {
		return usagef("--layers, --experts, --top-k and --ngram-base must be ≥ 0")
	}
	if err := outfile.NotInput("-o", *out, *model, filepath.Join(*model, "model.toml")); err != nil {
		return err
	}
	c, err := loadModel(*model)
	if err != nil {
		return err
	}
	if err := shrink(c, *layers, *experts, *topK); err != nil {
		return err
	}
	if p := &c.Architecture.PLE; *ngramBase > 0 && len(p.LayerIDs) > 0 && p.VocabSizeBase > *ngramBase {
		p.VocabSizeBase = *ngramBase
	}
	if err := applyPlan(c, *plan, *rows); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return fmt.Errorf("model %s after --layers/--experts/--top-k: %w", c.Name, err)
	}
	opt := convert.Options{DropMTP: *noMTP}
	if *vocab {
		if opt.Metadata, err = gguf.PlaceholderVocab(c.Architecture.VocabSize); err != nil {
			return fmt.Errorf("--vocab: %w", err)
		}
	}
	return writeGGUF(*out, c, weights.NewRandom(*seed), opt, "synth", stdout, stderr)
}

// shrink cuts a config to n layers (its first ones), e experts and k per token.
func shrink(c *models.Config, n, e, k int) error {
	a := &c.Architecture
	if n > 0 {
		if n > a.NumLayers {
			return usagef("--layers %d: model %s has %d layers", n, c.Name, a.NumLayers)
		}
		a.NumLayers, a.LayerTypes = n, a.LayerTypes[:n]
		var ids []int
		for _, id := range a.PLE.LayerIDs {
			if id <= n {
				ids = append(ids, id)
			}
		}
		a.PLE.LayerIDs = ids
	}
	if e > 0 {
		a.MoE.NumExperts = e
		a.MoE.ExpertsPerToken = min(a.MoE.ExpertsPerToken, e)
	}
	if k > 0 {
		a.MoE.ExpertsPerToken = min(k, a.MoE.NumExperts)
	}
	return nil
}
