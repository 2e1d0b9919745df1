package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/artifact"
)

func init() {
	commands["generate"] = command{
		summary: "write a model's window graphs, MSL kernels and Go bindings under generated/<model>/",
		help:    generateHelp,
		run:     runGenerate,
	}
}

const generateHelp = `Usage: stratagen generate [--out DIR] path/to/model.toml

Builds the window graph of every window shape the model config asks for
(decode windows of 1 … windows.max_decode_rows rows, and the prefill chunk of
windows.prefill_rows rows, which computes the last row's logits only) and
writes each as deterministic gzipped JSON to DIR/<model>/window-T<rows>.json.gz
(no name or time in the gzip header, so the bytes depend only on the graph), with
the barrier audit of every graph in DIR/<model>/audit.txt and audit.json (see
strata graph audit), the MSL of every kernel the graphs dispatch in
DIR/<model>/kernels.metal, and DIR/<model>/bindings.go, the Go package that
embeds them and registers the model with runtime/artifact. Files are written atomically; files of shapes the config
no longer asks for are removed. Run through go generate from the model's
folder.

Flags:
  --out DIR   the generated/ folder (default: generated, beside models/)

Example:
  stratagen generate --out generated models/tiny-a/model.toml
`

func runGenerate(args []string, stdout io.Writer) error {
	fs := newSilentFlagSet("generate")
	out := fs.String("out", "", "")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
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
	files, err := GenerateFiles(c)
	if err != nil {
		return err
	}
	dir := filepath.Join(*out, c.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
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
	// Stale window files would be loaded as if current.
	old, _ := filepath.Glob(filepath.Join(dir, "*-T*.json*"))
	for _, path := range old {
		if _, keep := files[filepath.Base(path)]; !keep {
			if err := os.Remove(path); err != nil {
				return fmt.Errorf("removing stale %s: %w", path, err)
			}
		}
	}
	fmt.Fprintf(stdout, "stratagen: %s: %d files in %s (%s)\n", c.Name, len(names), dir, strings.Join(names, ", "))
	return nil
}

// graphFile names a graph's artifact: window-T<rows>.json.gz for the trunk,
// mtp-T<rows>.json.gz for the MTP draft head.
func graphFile(g *graph.Graph) string {
	return artifact.GraphFile(g.Kind, g.Rows)
}

// gzipped compresses data deterministically: a fixed header (no name, zero
// time) and the best compression. The graphs are ~25× smaller so, which
// keeps the checked-in tree small (the big models' graphs were 24 MB).
func gzipped(data []byte) ([]byte, error) {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// GenerateFiles is every artifact of a model, by file name.
func GenerateFiles(c *models.Config) (map[string][]byte, error) {
	graphs, err := gen.Windows(c, false)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	for _, g := range graphs {
		j, err := g.JSON()
		if err != nil {
			return nil, err
		}
		if files[graphFile(g)], err = gzipped(j); err != nil {
			return nil, err
		}
	}
	audits, err := auditFiles(graphs)
	if err != nil {
		return nil, err
	}
	maps.Copy(files, audits)
	// The kernels every graph dispatches, and the Go package that embeds
	// them with the graphs.
	lib, err := gen.BuildLibrary(c, graphs)
	if err != nil {
		return nil, err
	}
	src, err := lib.MSL()
	if err != nil {
		return nil, err
	}
	files["kernels.metal"] = src
	var graphNames []string
	for _, g := range graphs {
		graphNames = append(graphNames, graphFile(g))
	}
	bindings, err := lib.Bindings(c, graphs, graphNames)
	if err != nil {
		return nil, err
	}
	files["bindings.go"] = bindings
	return files, nil
}
