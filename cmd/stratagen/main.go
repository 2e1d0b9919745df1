// Command stratagen is the build toolchain: it turns model descriptions into
// the artifacts the runtime loads. Each subcommand is one entry in commands;
// a new one can live in its own file and register itself from init.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/arch"
)

// command is one subcommand. run gets the arguments after the subcommand
// name; returning a usageError makes stratagen exit 2 and point at the help.
type command struct {
	summary string // one line for the command list
	help    string // full help: usage line, flags, an example
	run     func(args []string, stdout io.Writer) error
}

var commands = map[string]command{
	"import-hf": {
		summary: "convert an HF config.json into a model.toml",
		help:    importHFHelp,
		run:     runImportHF,
	},
}

// usageError is a mistake in how stratagen was called, as opposed to a
// failure doing what was asked.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func main() {
	outfile.RemoveOnSignal() // an interrupted write leaves no temporary file
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status (0 ok,
// 1 failure, 2 usage error) so tests can drive the CLI directly.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage())
		return 2
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		if len(rest) == 0 {
			fmt.Fprint(stdout, usage())
			return 0
		}
		cmd, ok := commands[rest[0]]
		if !ok {
			fmt.Fprintf(stderr, "stratagen: help: unknown command %q\n\n%s", rest[0], usage())
			return 2
		}
		fmt.Fprint(stdout, cmd.help)
		return 0
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "stratagen: unknown command %q\n\n%s", name, usage())
		return 2
	}
	err := cmd.run(rest, stdout)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, cmd.help)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "stratagen: %s: %v\nRun 'stratagen help %s' for usage.\n", name, err, name)
		return 2
	default:
		// One problem per line, each prefixed, so every line is attributable.
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintf(stderr, "stratagen: %s\n", line)
		}
		return 1
	}
}

func usage() string {
	var b strings.Builder
	b.WriteString(`stratagen builds what the strata runtime loads for a model.

Usage:
  stratagen <command> [flags] [arguments]
  stratagen help <command>

Commands:
`)
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %-12s %s\n", n, commands[n].summary)
	}
	b.WriteString(`
Example:
  stratagen import-hf --name tiny-a --context 256 --out models/tiny-a/model.toml testdata/oracles/tiny-a/config.json
`)
	return b.String()
}

const importHFHelp = `Usage: stratagen import-hf [flags] path/to/config.json

Reads a Hugging Face config.json (model_type qwen3_next or qwen4_exp) and
writes the equivalent model.toml: the architecture fields, a quant plan that keeps the
checkpoint's dtype for every tensor class, window shapes and runtime
defaults. The result is validated before anything is written.

Flags:
  --name NAME          model name (default: the folder holding config.json)
  --context N          runtime.context_length (default: min(max_position_embeddings, 32768))
  --decode-rows N      windows.max_decode_rows, 1 + most drafts per step (default 4)
  --prefill-rows N     windows.prefill_rows, rows per prefill chunk (default 64)
  --out FILE           write here, atomically (default: standard output)

Example:
  stratagen import-hf --name tiny-a --context 256 --prefill-rows 16 \
      --out models/tiny-a/model.toml testdata/oracles/tiny-a/config.json
`

func runImportHF(args []string, stdout io.Writer) error {
	fs := newSilentFlagSet("import-hf")
	name := fs.String("name", "", "")
	context := fs.Int("context", 0, "")
	decodeRows := fs.Int("decode-rows", 0, "")
	prefillRows := fs.Int("prefill-rows", 0, "")
	out := fs.String("out", "", "")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(positional) != 1 {
		return usagef("expected exactly one config.json path, got %d arguments", len(positional))
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"context", *context}, {"decode-rows", *decodeRows}, {"prefill-rows", *prefillRows}} {
		if f.v < 0 {
			return usagef("--%s is %d (expected a positive integer)", f.name, f.v)
		}
	}
	src := positional[0]
	if *out != "" {
		if err := outfile.NotInput("--out", *out, src); err != nil {
			return err
		}
	}
	if *name == "" {
		abs, err := filepath.Abs(src)
		if err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		*name = filepath.Base(filepath.Dir(abs))
	}

	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("reading HF config: %w", err)
	}
	cfg, err := arch.ImportHF(data, models.ImportOptions{
		Name:          *name,
		ContextLength: *context,
		MaxDecodeRows: *decodeRows,
		PrefillRows:   *prefillRows,
		Source:        src,
	})
	if err != nil {
		return err
	}
	text, err := cfg.MarshalTOMLFrom(src)
	if err != nil {
		return err
	}
	if *out == "" {
		_, err = stdout.Write(text)
		return err
	}
	// The README's own line writes into a model folder not made yet.
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	return models.WriteAtomic(*out, text)
}

// newSilentFlagSet returns a flag set that returns errors instead of printing
// them: run prints errors and help itself.
func newSilentFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parseInterspersed lets flags follow the positional arguments too
// ("import-hf config.json --name x"), which the flag package alone stops at.
// After "--" everything is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		if len(rest) == 0 {
			return positional, nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}
