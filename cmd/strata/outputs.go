package main

import (
	"fmt"
	"io"
	"os"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/runtime/format/pack"
	"github.com/strata-llm/strata/runtime/load"
)

// checkRunOutputs refuses outputs of strata run that would replace one of
// its inputs: the checkpoint directory's files, the GGUF, its pack.
func checkRunOutputs(hf, ggufPath string, outputs map[string]string) error {
	inputs := []string{hf, ggufPath}
	if ggufPath != "" {
		inputs = append(inputs, pack.Path(ggufPath))
	}
	for _, flag := range []string{"--dump-logits", "--spec-state"} {
		if p := outputs[flag]; p != "" && p != "-" {
			if err := outfile.NotInput(flag, p, inputs...); err != nil {
				return err
			}
		}
	}
	return nil
}

// warner reports problems that do not stop a run (an unusable or unsavable
// expert usage history) on stderr.
func warner(stderr io.Writer) func(error) {
	return func(err error) { fmt.Fprintf(stderr, "strata: warning: %v\n", err) }
}

// closeModel closes l, warning about what could not be saved (the usage
// history) instead of dropping it.
func closeModel(l *load.Loaded, stderr io.Writer) {
	if err := l.Close(); err != nil {
		warner(stderr)(err)
	}
}

// checkModelPaths reports a --hf that is not a directory or a --gguf that
// is not a file, before any other mistake in the command line.
func checkModelPaths(hf, ggufPath string) error {
	if hf != "" {
		st, err := os.Stat(hf)
		if err != nil {
			return fmt.Errorf("--hf: %w", err)
		}
		if !st.IsDir() {
			return fmt.Errorf("--hf %s is a file, expected an HF checkpoint directory (for a GGUF file, use --gguf)", hf)
		}
	}
	if ggufPath != "" {
		st, err := os.Stat(ggufPath)
		if err != nil {
			return fmt.Errorf("--gguf: %w", err)
		}
		if st.IsDir() {
			return fmt.Errorf("--gguf %s is a directory, expected a GGUF file (for an HF checkpoint directory, use --hf)", ggufPath)
		}
	}
	return nil
}
