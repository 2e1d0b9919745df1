package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// helpEntries splits a --help text's flag list into its entries, by flag
// name: the "  --name VALUE" line and the indented usage under it.
func helpEntries(t *testing.T, help string) map[string]string {
	t.Helper()
	_, list, ok := strings.Cut(help, "\nFlags:\n")
	if !ok {
		t.Fatalf("no flag list in %q", help)
	}
	out := map[string]string{}
	name := ""
	for _, line := range strings.Split(list, "\n") {
		switch {
		case strings.HasPrefix(line, "  -") && !strings.HasPrefix(line, "   "):
			name = strings.TrimLeft(strings.Fields(line)[0], "-")
			out[name] = line
		case name != "" && line != "":
			out[name] += "\n" + line
		}
	}
	return out
}

// Every command that opens a model declares the shared model flags it
// takes with one help text, and refuses a bad value of each with one
// message; a flag it does not take is refused as unknown.
func TestModelFlagsShared(t *testing.T) {
	all := []string{"hf", "gguf", "artifacts", "backend", "threads", "arena-experts", "io-threads", "context", "prefill-rows"}
	dir := t.TempDir()
	text, out := filepath.Join(dir, "text.go"), filepath.Join(dir, "out.imatrix")
	commands := []struct {
		name  string
		args  []string // what the command needs before it checks the model flags
		flags []string
	}{
		{"run", nil, all},
		{"serve", nil, all},
		{"perplexity", []string{"-f", text}, []string{"hf", "gguf", "artifacts", "backend", "arena-experts", "io-threads"}},
		{"imatrix", []string{"-f", text, "-o", out}, []string{"hf", "gguf", "artifacts"}},
	}
	// A bad value of each flag and what the refusal says.
	bad := map[string]struct {
		args []string
		want string
	}{
		"hf":            {[]string{"--hf", dir, "--gguf", text}, "--hf and --gguf are two models; give one"},
		"gguf":          {[]string{"--gguf", text, "--hf", dir}, "--hf and --gguf are two models; give one"},
		"backend":       {[]string{"--backend", "tpu"}, `--backend is "tpu", expected one of cpu, `},
		"threads":       {[]string{"--threads", "-1"}, "--threads is -1: expected 0"},
		"arena-experts": {[]string{"--arena-experts", "-1"}, "--arena-experts must be ≥ 0 and --io-threads ≥ 1, got -1 and 8"},
		"io-threads":    {[]string{"--io-threads", "0"}, "--arena-experts must be ≥ 0 and --io-threads ≥ 1, got 0 and 0"},
		"context":       {[]string{"--context", "-1"}, "--context must be ≥ 1, got -1"},
		"prefill-rows":  {[]string{"--prefill-rows", "-1"}, "--prefill-rows must be ≥ 1, got -1"},
	}
	entries := map[string]map[string]string{} // flag → command → help entry
	for _, c := range commands {
		stdout, stderr, status := runStrata(t, c.name, "--help")
		if status != 0 || stderr != "" {
			t.Fatalf("strata %s --help: status %d, stderr %q", c.name, status, stderr)
		}
		help := helpEntries(t, stdout)
		for _, f := range all {
			e, ok := help[f]
			if ok != slices.Contains(c.flags, f) {
				t.Errorf("strata %s --help: --%s listed %v, want %v", c.name, f, ok, !ok)
			}
			if !ok {
				// Not taken: refused by name, not silently ignored.
				_, stderr, status := runStrata(t, append(append([]string{c.name}, c.args...), "--"+f, "1")...)
				if status != 2 || !strings.Contains(stderr, "flag provided but not defined: -"+f) {
					t.Errorf("strata %s --%s 1: status %d, %q; want an unknown flag", c.name, f, status, stderr)
				}
				continue
			}
			if entries[f] == nil {
				entries[f] = map[string]string{}
			}
			entries[f][c.name] = e
			b, ok := bad[f]
			if !ok {
				continue
			}
			args := append(append([]string{c.name}, c.args...), b.args...)
			_, stderr, status := runStrata(t, args...)
			prefix := "strata " + c.name + ": "
			if status != 2 || !strings.HasPrefix(stderr, prefix+b.want) {
				t.Errorf("strata %s: status %d, %q; want 2 and %q", strings.Join(args[1:], " "), status, stderr, prefix+b.want)
			}
		}
	}
	for f, byCommand := range entries {
		want, from := byCommand["run"], "run"
		if want == "" {
			want, from = byCommand["imatrix"], "imatrix"
		}
		for cmd, e := range byCommand {
			if e != want {
				t.Errorf("--%s: strata %s's help\n%s\ndiffers from strata %s's\n%s", f, cmd, e, from, want)
			}
		}
	}
	// The entries are the texts that teach, not empty lines.
	for f, want := range map[string]string{"hf": "  --hf DIRECTORY\n      HF checkpoint directory", "gguf": "  --gguf FILE\n      GGUF model file",
		"backend": "  --backend NAME\n", "artifacts": "  --artifacts FOLDERS\n", "io-threads": "(default 8)"} {
		if e := entries[f]["run"]; !strings.Contains(e, want) {
			t.Errorf("--%s's entry %q lacks %q", f, e, want)
		}
	}
}
