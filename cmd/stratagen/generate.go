package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

func init() {
	commands["generate"] = command{
		summary: "generate a model's artifact (window graphs, MSL kernels, layouts): for a model.toml under generated/<model>/, or for a --gguf/--hf model beside it",
		help:    generateHelp,
		run:     runGenerate,
	}
}

const generateHelp = `Usage: stratagen generate [--out DIR] path/to/model.toml
       stratagen generate (--gguf FILE | --hf DIR) [--context N] [--prefill-rows N] [--moce ...] [--read-ahead] [--out DIR]

Generates a model's artifact (gen.Generate): the window graph of every
window shape the config asks for (decode windows of 1 … windows.max_decode_rows
rows, and the prefill chunk of windows.prefill_rows rows, twice: last-row
logits, and every row's for --dump-logits and perplexity), the MTP head's,
kernels.metal with every kernel they dispatch, and manifest.json: the kernels,
function constants, pipelines, argument-struct layouts, buffers, params
header, every tensor's storage format, the config, and its content key, which
is how strata finds the artifact for a model (docs/artifact.md). Graphs are
deterministic gzipped JSON (no name or time in the gzip header). The folder
is written into place whole, or not at all.

With a model.toml (run by go generate from models/<model>/) it writes
DIR/<model>/artifact/, DIR/<model>/bindings.go (the Go package that embeds the
artifact and registers it, so programs importing it need no files) and the
barrier audit of every graph in DIR/<model>/audit.txt and audit.json (see
strata graph audit).

With --gguf or --hf it generates for that model file as strata opens it:
its config (an HF config.json; a GGUF's embedded strata.config, or a
llama.cpp file's qwen3next metadata) with the formats its tensors really
hold, and the run's --context, --prefill-rows, MoCE knobs and --read-ahead,
which change the graphs (give strata run the same ones). It writes FILE.artifact/ beside
a GGUF and DIR/artifact/ inside an HF directory, where strata run looks, or
--out DIR (then run strata with --artifacts DIR).

Flags:
  --out DIR           model.toml: the generated/ folder (default: generated,
                      beside models/); --gguf/--hf: the artifact folder
  --gguf FILE         a GGUF model
  --hf DIR            an HF checkpoint directory
  --context N         KV-cache length (default: the model's)
  --prefill-rows N    rows per prefill window (default: the model's)
  --moce              cache-aware routing, with the config's knobs or:
  --moce-lambda X     the non-resident experts' probability scale λ
  --moce-max-rank N   the deepest rank a resident expert may come from (-1: uncapped)
  --read-ahead        each MoE layer also predicts the next layer's experts (the
                      next router on its input) for the streamer to read ahead

Examples:
  stratagen generate --out generated models/tiny-a/model.toml
  stratagen generate --gguf model.gguf --context 8192
`

func runGenerate(args []string, stdout io.Writer) error {
	fs := newSilentFlagSet("generate")
	out := fs.String("out", "", "")
	ggufPath := fs.String("gguf", "", "")
	hf := fs.String("hf", "", "")
	context := fs.Int("context", 0, "")
	prefill := fs.Int("prefill-rows", 0, "")
	moce := fs.Bool("moce", false, "")
	moceLambda := fs.Float64("moce-lambda", 0, "")
	moceMaxRank := fs.Int("moce-max-rank", 0, "")
	readAhead := fs.Bool("read-ahead", false, "")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if *ggufPath != "" || *hf != "" {
		if len(positional) != 0 || (*ggufPath != "" && *hf != "") {
			return usagef("expected one of --gguf FILE or --hf DIR and no model.toml")
		}
		return generateForModel(modelSpec{gguf: *ggufPath, hf: *hf, out: *out, context: *context, prefill: *prefill,
			moce: *moce, moceLambda: *moceLambda, moceMaxRank: *moceMaxRank, readAhead: *readAhead}, stdout)
	}
	if *context != 0 || *prefill != 0 || *moce || *readAhead {
		return usagef("--context, --prefill-rows, --moce and --read-ahead go with --gguf or --hf (a model.toml says them itself)")
	}
	if len(positional) != 1 {
		return usagef("expected exactly one model.toml path, got %d arguments", len(positional))
	}
	c, err := models.Load(positional[0])
	if err != nil {
		return err
	}
	if *out == "" { // models/<name>/model.toml → generated/
		abs, err := filepath.Abs(positional[0])
		if err != nil {
			return fmt.Errorf("%s: %w", positional[0], err)
		}
		*out = filepath.Join(filepath.Dir(filepath.Dir(filepath.Dir(abs))), "generated")
	}
	a, files, err := GenerateFiles(c)
	if err != nil {
		return err
	}
	dir := filepath.Join(*out, c.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	if err := a.Write(filepath.Join(dir, gen.ArtifactDir)); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if err := models.WriteAtomic(filepath.Join(dir, name), files[name]); err != nil {
			return err
		}
	}
	// Files of the layout before the artifact folder.
	old, _ := filepath.Glob(filepath.Join(dir, "*-T*.json*"))
	for _, path := range append(old, filepath.Join(dir, artifact.KernelsFile)) {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("removing stale %s: %w", path, err)
		}
	}
	fmt.Fprintf(stdout, "stratagen: %s: %s/ (%d graphs, key %s) and %s in %s\n", c.Name, gen.ArtifactDir, len(a.Graphs), artifact.ShortKey(a.Key), strings.Join(names, ", "), dir)
	return nil
}

// GenerateFiles is the artifact of a model.toml's config and the files of
// generated/<model> beside its folder: bindings.go and the audits.
func GenerateFiles(c *models.Config) (*artifact.Artifact, map[string][]byte, error) {
	a, err := gen.Generate(c)
	if err != nil {
		return nil, nil, err
	}
	var graphs []*graph.Graph // the audits cover the plain graphs, in order
	for _, ref := range a.Graphs {
		if ref.AllLogits {
			continue
		}
		g, err := a.Graph(ref.Kind, ref.Rows)
		if err != nil {
			return nil, nil, err
		}
		graphs = append(graphs, g)
	}
	files, err := auditFiles(graphs)
	if err != nil {
		return nil, nil, err
	}
	bindings, err := gen.Bindings(c.Name)
	if err != nil {
		return nil, nil, err
	}
	maps.Copy(files, map[string][]byte{"bindings.go": bindings})
	return a, files, nil
}
