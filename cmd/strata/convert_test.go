package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const tinyK512 = "../../testdata/oracles/tiny-k512"

// convert → pack → stratagen generate --gguf → run: the GGUF (experts
// through the pack) decodes the reference greedy continuation of a
// passthrough conversion exactly, and pack --verify accepts the pack. Until
// its artifact is generated, run refuses naming the command.
func TestConvertPackRun(t *testing.T) {
	defer noGenerate()()
	dir := t.TempDir()
	out := filepath.Join(dir, "k512.gguf")
	stdout, stderr, status := runStrata(t, "convert", "--hf", tinyK512, "-o", out)
	if status != 0 {
		t.Fatalf("convert: status %d: %s", status, stderr)
	}
	if !strings.Contains(stdout, "wrote "+out) || !strings.Contains(stdout, "bytes") || !strings.Contains(stderr, "100%") ||
		!strings.Contains(stderr, "next: strata run --gguf "+out) || !strings.Contains(stderr, "stratagen generate --gguf "+out) {
		t.Errorf("convert output: %q / %q", stdout, stderr)
	}
	if _, stderr, status = runStrata(t, "pack", out); status != 0 {
		t.Fatalf("pack: status %d: %s", status, stderr)
	}
	if stdout, stderr, status = runStrata(t, "pack", out, "--verify"); status != 0 || !strings.Contains(stdout, "matches") {
		t.Fatalf("pack --verify: status %d: %s %s", status, stdout, stderr)
	}
	greedy := refInts(t, tinyK512, "greedy_tokens")
	_, stderr, status = runStrata(t, "run", "--gguf", out, "--tokens", "1", "-n", "1")
	if status != 1 || !strings.Contains(stderr, "no generated artifact for tiny-k512") || !strings.Contains(stderr, "run  stratagen generate --gguf "+out) {
		t.Fatalf("run without the artifact: status %d, stderr %q", status, stderr)
	}
	stratagenGGUF(t, out)
	stdout, stderr, status = runStrata(t, "run", "--gguf", out, "--tokens", joinInts(greedy[:16], ","), "-n", "32")
	if status != 0 {
		t.Fatalf("run --gguf: status %d: %s", status, stderr)
	}
	if strings.TrimSpace(stdout) != joinInts(greedy[16:48], " ") {
		t.Fatalf("run --gguf: %q, want %q", stdout, joinInts(greedy[16:48], " "))
	}
	// Converting again over the file leaves the old pack stale: run says so.
	if _, stderr, status = runStrata(t, "convert", "--hf", tinyK512, "--quant", "trunk=q8_0", "-o", out); status != 0 || !strings.Contains(stderr, "strata pack") {
		t.Fatalf("re-convert: status %d, stderr %q (want a note about the pack)", status, stderr)
	}
	_, stderr, status = runStrata(t, "run", "--gguf", out, "--tokens", "1,2", "-n", "1")
	if status != 1 || !strings.Contains(stderr, "stale expert pack") || !strings.Contains(stderr, "strata pack "+out) {
		t.Fatalf("run with a stale pack: status %d, stderr %q", status, stderr)
	}
}

const q4A = "../../testdata/oracles/q4-a"

// Qwen3.8-Flash-Next math (q4-a): convert → pack → run decodes the reference
// greedy continuation (n-gram table rows gathered from the GGUF), and synth
// writes a random model with a random n-gram table that runs.
func TestConvertSynthQwen4(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "q4.gguf")
	if _, stderr, status := runStrata(t, "convert", "--hf", q4A, "-o", out); status != 0 {
		t.Fatalf("convert: status %d: %s", status, stderr)
	}
	if _, stderr, status := runStrata(t, "pack", out); status != 0 {
		t.Fatalf("pack: status %d: %s", status, stderr)
	}
	greedy := refInts(t, q4A, "greedy_tokens")
	stdout, stderr, status := runStrata(t, "run", "--gguf", out, "--tokens", joinInts(greedy[:16], ","), "-n", "32")
	if status != 0 || strings.TrimSpace(stdout) != joinInts(greedy[16:48], " ") {
		t.Fatalf("run --gguf: status %d: %q, want %q (%s)", status, stdout, joinInts(greedy[16:48], " "), stderr)
	}
	synth := filepath.Join(dir, "synth.gguf")
	stdout, stderr, status = runStrata(t, "synth", "--model", "q4-a", "--quant", "embed=q8_0", "--ngram-base", "100", "-o", synth)
	if status != 0 || !strings.Contains(stdout, "q8_0") {
		t.Fatalf("synth: status %d: %q %s", status, stdout, stderr)
	}
	if stdout, stderr, status = runStrata(t, "run", "--gguf", synth, "--tokens", "1,2,3", "-n", "4"); status != 0 || len(strings.Fields(stdout)) != 4 {
		t.Fatalf("run synth: status %d: %q %s", status, stdout, stderr)
	}
}

func TestConvertSynthErrors(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"convert", "--hf", tinyA}, 2, "--hf and -o are required"},
		{[]string{"convert", "--hf", tinyA, "-o", filepath.Join(dir, "x.gguf"), "--quant", "experts=iq3_xs"}, 2, `unknown quant format "iq3_xs"`},
		{[]string{"convert", "--hf", tinyA, "-o", filepath.Join(dir, "x.gguf"), "--quant", "ffn=q8_0"}, 2, `unknown class "ffn"`},
		{[]string{"convert", "--hf", tinyA, "-o", filepath.Join(dir, "x.gguf"), "--rows", "squeeze"}, 2, "unknown row policy"},
		{[]string{"convert", "--hf", dir, "-o", filepath.Join(dir, "x.gguf")}, 1, "config.json"},
		{[]string{"synth", "--model", "tiny-a"}, 2, "--model and -o are required"},
		{[]string{"synth", "--model", "nope", "-o", filepath.Join(dir, "x.gguf")}, 2, `no model "nope"`},
		{[]string{"synth", "--model", "tiny-a", "--layers", "9", "-o", filepath.Join(dir, "x.gguf")}, 2, "has 4 layers"},
		{[]string{"synth", "--model", "q4-a", "--ngram-base", "-1", "-o", filepath.Join(dir, "x.gguf")}, 2, "must be ≥ 0"},
		{[]string{"pack"}, 2, "expected one GGUF file"},
		{[]string{"pack", filepath.Join(dir, "missing.gguf")}, 1, "no such file"},
		{[]string{"run", "--gguf", filepath.Join(dir, "x.gguf")}, 1, "x.gguf: no such file"}, // the missing file first, then the missing flag
	} {
		_, stderr, status := runStrata(t, c.args...)
		if status != c.status || !strings.Contains(stderr, c.want) {
			t.Errorf("strata %s: status %d, stderr %q; want %d and %q", strings.Join(c.args, " "), status, stderr, c.status, c.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "x.gguf")); err == nil {
		t.Errorf("a failed command left x.gguf behind")
	}
}

// synth writes any configured model in the planned formats; the result packs
// and runs.
func TestSynthPackRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "synth.gguf")
	_, stderr, status := runStrata(t, "synth", "--model", "tiny-k512", "--experts", "64", "--top-k", "8",
		"--quant", "experts=iq2_xs,trunk=q8_0,rows=pad", "-o", out)
	// Padded rows are not a valid GGUF: written only when asked, with a
	// warning naming the tensors and the default.
	if status != 0 || !strings.Contains(stderr, "blk.0.ffn_gate_exps.weight (rows of 64 → 256 in iq2_xs)") || !strings.Contains(stderr, "strata's only") || !strings.Contains(stderr, "rows=fallback") {
		t.Errorf("synth rows=pad: status %d, %q; want the padded tensors named as a strata-only file", status, stderr)
	}
	stdout, stderr, status := runStrata(t, "synth", "--model", "tiny-k512", "--experts", "64", "--top-k", "8",
		"--quant", "experts=iq2_xs,trunk=q8_0", "-o", out)
	if status != 0 {
		t.Fatalf("synth: status %d: %s", status, stderr)
	}
	// tiny-k512's expert rows of 64 and 16 are not whole iq2_xs blocks:
	// llama.cpp's fallbacks, named.
	if !strings.Contains(stdout, "iq2_xs") || !strings.Contains(stderr, "iq2_xs → iq4_nl") || !strings.Contains(stderr, "iq2_xs → f16") {
		t.Errorf("synth output %q %q does not report the plan and its fallbacks", stdout, stderr)
	}
	if _, stderr, status = runStrata(t, "pack", out); status != 0 {
		t.Fatalf("pack: status %d: %s", status, stderr)
	}
	stdout, stderr, status = runStrata(t, "run", "--gguf", out, "--tokens", "1,2,3", "-n", "4")
	if status != 0 || len(strings.Fields(stdout)) != 4 {
		t.Fatalf("run: status %d: %q %s", status, stdout, stderr)
	}
}

func TestNewCommandsHelp(t *testing.T) {
	for _, c := range []struct{ cmd, want string }{
		{"convert", "--quant takes class=format items"},
		{"pack", "one read fetches an expert"},
		{"synth", "strata synth --model qwen3-next-80b-a3b"},
	} {
		for _, h := range []string{"--help", "-h"} {
			stdout, stderr, status := runStrata(t, c.cmd, h)
			if status != 0 || !strings.Contains(stdout, c.want) || stderr != "" {
				t.Errorf("strata %s %s: status %d, stdout %q lacks %q (stderr %q)", c.cmd, h, status, stdout, c.want, stderr)
			}
			// Flags as they are typed, with placeholders for values.
			if !strings.Contains(stdout, "\n  -o FILE\n") {
				t.Errorf("strata %s %s: no \"-o FILE\" line in %q", c.cmd, h, stdout)
			}
		}
	}
}
