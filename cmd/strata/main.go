// Command strata runs models: `strata run` decodes greedily on the cpu
// backend from an HF checkpoint directory or the embedded default model.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/strata-llm/strata/internal/outfile"
)

// usageError is a mistake in how strata was called (exit status 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"run":   {"generate from a prompt of token ids or text (-p), or chat (--chat)", runCmd},
	"serve": {"serve the model over HTTP with OpenAI's API (chat, completions, streaming)", serveCmd},
}

func main() {
	// An interrupted convert, synth or pack leaves no temporary file; strata
	// serve takes SIGINT/SIGTERM itself, to finish the running requests and
	// save its state before it exits.
	if len(os.Args) < 2 || os.Args[1] != "serve" {
		outfile.RemoveOnSignal()
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if len(args) > 1 {
			if c, ok := commands[args[1]]; ok {
				var h helpRequest
				if err := c.run([]string{"--help"}, stdout, stderr); errors.As(err, &h) {
					fmt.Fprint(stdout, h.text)
				}
				return 0
			}
		}
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "--version" || args[0] == "version" {
		printVersion(stdout)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "strata: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := c.run(args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.As(err, new(helpRequest)):
		var h helpRequest
		errors.As(err, &h)
		fmt.Fprint(stdout, h.text)
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(exitStatus)):
		var e exitStatus
		errors.As(err, &e)
		return e.code
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "strata %s: %v\n(see strata %s --help)\n", args[0], err, args[0])
		return 2
	default:
		fmt.Fprintf(stderr, "strata %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprint(w, `strata runs giant Mixture-of-Experts models from their window graphs.

Usage:
  strata <command> [flags]

Commands:
`)
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprint(w, `
Examples:
  strata run                                  # the embedded tiny-go: a Go snippet, continued as text
  strata run --hf ./Qwen3-Next-tiny --tokens 1,2,3 -n 8
  strata run --gguf model.gguf -p 'func (s *Server) '   # text in, text out
  strata run --hf DIR --tokens 5,6 -n 0 --dump-logits prompt.safetensors
  strata serve --gguf model.gguf --port 8080  # OpenAI's API for chat clients, a chat page at /

Run "strata <command> --help" for the flags of one command, "strata --version"
for the version.
`)
}

// newFlagSet returns a flag set that reports errors instead of exiting, with
// a usage text made of a synopsis, a paragraph and the flag list.
func newFlagSet(name, synopsis, about string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Parse errors come back as usage errors; the full text only on --help.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	flagStderr[fs] = stderr
	helps[fs] = func() error {
		var b strings.Builder
		fmt.Fprintf(&b, "Usage:\n  strata %s %s\n\n%s\n\nFlags:\n", name, synopsis, strings.TrimSpace(about))
		printFlags(&b, fs)
		return helpRequest{b.String()}
	}
	return fs
}

// helps holds the --help text of each flag set, as a helpRequest error.
var helps = map[*flag.FlagSet]func() error{}

// flagStderr is the stderr of each command's flag set, for what its
// shared flags print (the generate step).
var flagStderr = map[*flag.FlagSet]io.Writer{}

// parseFlags parses args, turning flag errors into usage errors.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helps[fs]()
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}
