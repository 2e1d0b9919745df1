package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

func init() {
	commands["graph"] = command{"inspect window graphs: strata graph audit", graphCmd}
}

const graphUsage = `Usage:
  strata graph audit --model NAME --rows T [--json] [--mtp]

Subcommands:
  audit    barriers placed / naive / lower bound, host points, bytes and the
           critical path of one window graph, per layer and in total

Run "strata graph audit --help" for its flags.
`

func graphCmd(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("expected a subcommand: audit")
	}
	switch args[0] {
	case "audit":
		return graphAuditCmd(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stderr, graphUsage)
		return flag.ErrHelp
	default:
		return usagef("unknown subcommand %q, expected audit", args[0])
	}
}

const graphAuditAbout = `
Builds the window graph of a model for windows of T rows, as stratagen does
(prefill shapes, T > windows.max_decode_rows, compute last-row logits), and
prints its audit: dispatches, barriers placed by the passes, the naive count
(one per dispatch) and the lower bound (the dependency depth: the fewest
barriers any order needs), host points, declared bytes read and written, the
critical path and the ICB replay plan, per layer ("other": embedding and head)
and in total. --json prints one JSON object with the same numbers.

NAME is a model folder under models/ (the configs are built in), or a path to
a model.toml.`

func graphAuditCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("graph audit", "--model NAME --rows T [--json] [--mtp]", graphAuditAbout, stderr)
	model := fs.String("model", "", "model `name` (a folder under models/: "+strings.Join(models.EmbeddedNames(), ", ")+") or a model.toml path")
	rows := fs.Int("rows", 0, "window shape: rows `T` per window (≥ 1)")
	asJSON := fs.Bool("json", false, "print the audit as JSON")
	mtp := fs.Bool("mtp", false, "audit the MTP draft head's graph instead of the trunk window")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return usagef("--model is required (one of %s)", strings.Join(models.EmbeddedNames(), ", "))
	}
	if *rows < 1 {
		return usagef("--rows must be ≥ 1, got %d", *rows)
	}
	c, err := loadModel(*model)
	if err != nil {
		return err
	}
	graphs, err := gen.Windows(c, false, *rows)
	if err != nil {
		return err
	}
	var g *graph.Graph
	for _, x := range graphs {
		if x.Rows == *rows && (x.Kind == graph.KindMTP) == *mtp {
			g = x
		}
	}
	if g == nil {
		return fmt.Errorf("model %s has no MTP head", c.Name)
	}
	a := graph.NewAudit(g)
	if *asJSON {
		j, err := a.JSON()
		if err != nil {
			return err
		}
		if _, err := stdout.Write(j); err != nil {
			return fmt.Errorf("writing the audit: %w", err)
		}
		return nil
	}
	return a.WriteText(stdout)
}

// loadModel reads a model config by built-in name, or from a path when the
// argument looks like one.
func loadModel(nameOrPath string) (*models.Config, error) {
	if strings.HasSuffix(nameOrPath, ".toml") || strings.ContainsAny(nameOrPath, `/\`) {
		return models.Load(nameOrPath)
	}
	if !slices.Contains(models.EmbeddedNames(), nameOrPath) {
		return nil, usagef("--model: no model %q (built in: %s)", nameOrPath, strings.Join(models.EmbeddedNames(), ", "))
	}
	return models.Embedded(nameOrPath)
}
