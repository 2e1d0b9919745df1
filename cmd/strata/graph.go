package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/strata-llm/strata/artifact"
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
Prints the audit of one window graph of a model's generated artifact (the
graph strata runs; prefill shapes, T > windows.max_decode_rows, compute
last-row logits): dispatches, barriers placed by the passes, the naive count
(one per dispatch) and the lower bound (the dependency depth: the fewest
barriers any order needs), host points, declared bytes read and written, the
critical path and the ICB replay plan, per layer ("other": embedding and head)
and in total. --json prints one JSON object with the same numbers.

NAME is a model whose artifact is compiled in (` + "`strata graph audit --model tiny-go --rows 1`" + `),
or the path of an artifact folder (generated/<model>/artifact, or one stratagen
generate --gguf/--hf wrote) or of a generated/<model> folder.`

func graphAuditCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("graph audit", "--model NAME --rows T [--json] [--mtp]", graphAuditAbout, stderr)
	model := fs.String("model", "", "model `name` (compiled in: "+strings.Join(artifact.Names(), ", ")+") or an artifact folder")
	rows := fs.Int("rows", 0, "window shape: rows `T` per window (≥ 1)")
	asJSON := fs.Bool("json", false, "print the audit as JSON")
	mtp := fs.Bool("mtp", false, "audit the MTP draft head's graph instead of the trunk window")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return usagef("--model is required (compiled in: %s, or an artifact folder)", strings.Join(artifact.Names(), ", "))
	}
	if *rows < 1 {
		return usagef("--rows must be ≥ 1, got %d", *rows)
	}
	a, err := artifactOf(*model)
	if err != nil {
		return err
	}
	kind := graph.KindTrunk
	if *mtp {
		kind = graph.KindMTP
		if len(a.Shapes(kind)) == 0 {
			return fmt.Errorf("model %s has no MTP head", a.Name)
		}
	}
	g, err := a.Graph(kind, *rows)
	if err != nil {
		return err
	}
	au := graph.NewAudit(g)
	if *asJSON {
		j, err := au.JSON()
		if err != nil {
			return err
		}
		if _, err := stdout.Write(j); err != nil {
			return fmt.Errorf("writing the audit: %w", err)
		}
		return nil
	}
	return au.WriteText(stdout)
}

// artifactOf is the compiled-in artifact called nameOrPath, or the one in
// the folder it names (an artifact folder or a generated/<model> folder).
func artifactOf(nameOrPath string) (*artifact.Artifact, error) {
	if !strings.ContainsAny(nameOrPath, `/\`) {
		if slices.Contains(artifact.Names(), nameOrPath) {
			return artifact.Lookup(nameOrPath)
		}
		if _, err := os.Stat(nameOrPath); err != nil {
			return nil, usagef("--model: no model %q is compiled in (%s); give an artifact folder (stratagen generate writes one)", nameOrPath, strings.Join(artifact.Names(), ", "))
		}
	}
	dir := nameOrPath
	if _, err := os.Stat(filepath.Join(dir, artifact.ManifestFile)); err != nil {
		if _, err := os.Stat(filepath.Join(dir, "artifact", artifact.ManifestFile)); err == nil {
			dir = filepath.Join(dir, "artifact")
		}
	}
	a, err := artifact.Load(os.DirFS(dir))
	if err != nil {
		return nil, fmt.Errorf("--model %s: %w", nameOrPath, err)
	}
	return a, nil
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
