package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
	"github.com/strata-llm/strata/runtime/weights"
)

// synthPacked writes a small streaming model (tiny-k512 at 64 experts) and
// its pack into a fresh directory.
func synthPacked(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "s.gguf")
	if _, stderr, status := runStrata(t, "synth", "--model", "tiny-k512", "--experts", "64", "--top-k", "8", "-o", out); status != 0 {
		t.Fatalf("synth: status %d: %s", status, stderr)
	}
	if _, stderr, status := runStrata(t, "pack", out); status != 0 {
		t.Fatalf("pack: status %d: %s", status, stderr)
	}
	return out
}

// No command writes over one of its inputs, whether the output names the
// input, a symbolic link to it or a hard link of it.
func TestOutputsNeverReplaceInputs(t *testing.T) {
	g := synthPacked(t)
	dir := filepath.Dir(g)
	ck := copyCheckpoint(t, nil, nil)
	link := filepath.Join(dir, "link.gguf")
	if err := os.Symlink(g, link); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(ck, "hard.safetensors")
	if err := os.Link(filepath.Join(ck, "model.safetensors"), hard); err != nil {
		t.Fatal(err)
	}
	toml := filepath.Join(dir, "m.toml")
	if err := os.WriteFile(toml, mustRead(t, "../../models/tiny-k512/model.toml"), 0o644); err != nil {
		t.Fatal(err)
	}
	inputs := []string{g, pack.Path(g), filepath.Join(ck, "model.safetensors"), filepath.Join(ck, "config.json"), toml}
	before := map[string][]byte{}
	for _, p := range inputs {
		before[p] = mustRead(t, p)
	}
	for _, args := range [][]string{
		{"pack", "-o", g, g},
		{"pack", "-o", link, g},
		{"pack", g, "-o", pack.Path(link)}, // the pack of a link is the pack itself: allowed
		{"convert", "--hf", ck, "-o", filepath.Join(ck, "model.safetensors")},
		{"convert", "--hf", ck, "-o", hard},
		{"convert", "--hf", ck, "-o", filepath.Join(ck, "config.json")},
		{"synth", "--model", toml, "-o", toml},
		{"run", "--hf", ck, "--tokens", "1,2", "-n", "1", "--dump-logits", filepath.Join(ck, "model.safetensors")},
		{"run", "--gguf", g, "--tokens", "1,2", "-n", "1", "--dump-logits", link},
		{"run", "--gguf", g, "--tokens", "1,2", "-n", "1", "--spec", "auto", "--spec-state", pack.Path(g)},
	} {
		_, stderr, status := runStrata(t, args...)
		allowed := args[0] == "pack" && args[2] == "-o" && args[3] == pack.Path(link)
		if allowed {
			if status != 0 {
				t.Errorf("strata %s: status %d: %s", strings.Join(args, " "), status, stderr)
			}
			before[pack.Path(g)] = mustRead(t, pack.Path(g)) // rewritten, the same bytes
			continue
		}
		if status == 0 || !strings.Contains(stderr, "refusing to overwrite") {
			t.Errorf("strata %s: status %d, stderr %q; want a refusal", strings.Join(args, " "), status, stderr)
		}
	}
	for _, p := range inputs {
		if !bytes.Equal(mustRead(t, p), before[p]) {
			t.Errorf("input %s was changed", p)
		}
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A damaged usage history, or one that cannot be read or saved, is a
// warning, not silence; a run that fails midway saves none.
func TestUsageHistoryWarnings(t *testing.T) {
	g := synthPacked(t)
	hist := pack.Path(g) + ".usage"
	args := []string{"run", "--gguf", g, "--tokens", "1,2,3", "-n", "2", "--arena-experts", "24"}

	if _, stderr, status := runStrata(t, args...); status != 0 {
		t.Fatalf("run: status %d: %s", status, stderr)
	}
	st, err := os.Stat(hist)
	if err != nil || st.Mode().Perm() != 0o644 {
		t.Fatalf("usage history after a run: %v (mode %v), want a 0644 file", err, st.Mode())
	}

	data := mustRead(t, hist)
	data[len("STRATAUSAGE\x00")+4] ^= 0x40 // the layer count
	os.WriteFile(hist, data, 0o644)
	if _, stderr, status := runStrata(t, args...); status != 0 || !strings.Contains(stderr, "warning: ignoring the expert usage history") {
		t.Errorf("damaged history: status %d, stderr %q; want a warning", status, stderr)
	}

	// A directory in its place: unreadable and unsavable.
	os.Remove(hist)
	os.Mkdir(hist, 0o755)
	_, stderr, status := runStrata(t, args...)
	if status != 0 || strings.Count(stderr, "warning:") < 2 || !strings.Contains(stderr, "saving the usage history") {
		t.Errorf("unreadable, unsavable history: status %d, stderr %q; want a warning for each", status, stderr)
	}
	os.Remove(hist)

	// Past the context: the run fails, and its history is not saved.
	_, stderr, status = runStrata(t, append(args[:len(args)-2], "-n", "8", "--context", "6", "--arena-experts", "24")...)
	if status == 0 {
		t.Fatalf("a run past --context succeeded: %s", stderr)
	}
	if _, err := os.Stat(hist); !os.IsNotExist(err) {
		t.Errorf("a failed run wrote the usage history (%v)", err)
	}
}

// Sizes past what the model or the machine allows are named errors, not an
// out-of-memory crash or a makeslice panic.
func TestRunSizesBounded(t *testing.T) {
	g := synthPacked(t)
	// max_position_embeddings raised so only the machine's memory bounds
	// the context.
	long := copyCheckpoint(t, func(s string) string {
		return strings.Replace(s, `"max_position_embeddings": 4096`, `"max_position_embeddings": 1099511627776`, 1)
	}, nil)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--context", "999999999999"}, "max_position_embeddings"},
		// (within 32 bits: the generator refuses a context its function constants cannot hold)
		{[]string{"run", "--hf", long, "--tokens", "1,2", "--context", "4000000000"}, "lower --context"},
	} {
		_, stderr, status := runStrata(t, c.args...)
		if status != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("strata %s: status %d, stderr %q; want 1 and %q", strings.Join(c.args, " "), status, stderr, c.want)
		}
	}
	// An arena larger than the model's experts is every expert resident.
	for _, args := range [][]string{
		{"run", "--gguf", g, "--tokens", "1,2", "-n", "1", "--arena-experts", "99999999"},
		{"bench", "--gguf", g, "-p", "2", "-n", "1", "-r", "1", "--warmup", "0", "--arena-experts", "99999999"},
	} {
		if _, stderr, status := runStrata(t, args...); status != 0 || !strings.Contains(stderr, "all 256 experts resident") {
			t.Errorf("strata %s: status %d, stderr %q; want every expert resident", strings.Join(args, " "), status, stderr)
		}
	}
}

// A plan that falls back says so: a warning names the tensors, and the
// summary and the embedded config name the format written.
func TestConvertFallbackIsLoud(t *testing.T) {
	out := filepath.Join(t.TempDir(), "fb.gguf")
	stdout, stderr, status := runStrata(t, "convert", "--hf", tinyA, "--quant", "experts=iq2_xs", "-o", out)
	if status != 0 {
		t.Fatalf("convert: status %d: %s", status, stderr)
	}
	if !strings.Contains(stderr, "warning: 12 tensors are not in the planned format") || !strings.Contains(stderr, "iq2_xs → iq4_nl") || !strings.Contains(stderr, "layers.0.moe.experts.gate") {
		t.Errorf("no warning naming the fallen-back tensors: %q", stderr)
	}
	if !strings.Contains(stdout, "experts=iq4_nl") || strings.Contains(stdout, "experts=iq2_xs") {
		t.Errorf("summary does not name the format written: %q", stdout)
	}
	g, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	c, err := weights.ConfigOf(g)
	if err != nil {
		t.Fatal(err)
	}
	if c.Quant.Experts != "iq4_nl" {
		t.Errorf("embedded config says experts=%s, the file holds iq4_nl", c.Quant.Experts)
	}
	if _, stderr, status := runStrata(t, "run", "--gguf", out, "--tokens", "1,2,3", "-n", "2"); status != 0 {
		t.Errorf("run: status %d: %s", status, stderr)
	}
}

// What a new user hits first: help on stdout with flags as typed, a model
// path that is not what the flag expects, a missing file named before a
// missing flag, progress as lines in a log.
func TestFirstContact(t *testing.T) {
	for _, args := range [][]string{{"run", "-h"}, {"run", "--help"}, {"help", "run"}, {"bench", "-h"}} {
		stdout, stderr, status := runStrata(t, args...)
		if status != 0 || stderr != "" || !strings.Contains(stdout, "\n  --backend NAME") && !strings.Contains(stdout, "\n  --backend BACKENDS") || !strings.Contains(stdout, "\n  --hf DIRECTORY\n") {
			t.Errorf("strata %s: status %d, stderr %q, stdout %q", strings.Join(args, " "), status, stderr, stdout)
		}
	}
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--gguf", dir, "--tokens", "1"}, "is a directory, expected a GGUF file"},
		{[]string{"run", "--gguf", filepath.Join(dir, "missing.gguf")}, "no such file"},
		{[]string{"run", "--hf", filepath.Join(dir, "missing")}, "no such file"},
		{[]string{"bench", "--gguf", dir}, "is a directory, expected a GGUF file"},
		{[]string{"convert", "--hf", filepath.Join(dir, "missing")}, "no such file"}, // before "-o is required"
	} {
		_, stderr, status := runStrata(t, c.args...)
		if status != 1 || !strings.Contains(stderr, c.want) {
			t.Errorf("strata %s: status %d, stderr %q; want 1 and %q", strings.Join(c.args, " "), status, stderr, c.want)
		}
	}
	_, stderr, status := runStrata(t, "convert", "--hf", tinyA, "-o", filepath.Join(dir, "p.gguf"))
	if status != 0 || strings.Contains(stderr, "\r") || strings.Count(stderr, "\n") > 12 || !strings.Contains(stderr, "convert: 100%") {
		t.Errorf("progress in a log: status %d, %q; want a line per 10%%, no carriage returns", status, stderr)
	}
}

// Streaming from the command line: an arena in GB, MoCE and its knobs, on
// run and bench; the arena chosen is printed at the start.
func TestStreamingFlags(t *testing.T) {
	g := synthPacked(t)
	for _, args := range [][]string{
		{"run", "--gguf", g, "--tokens", "1,2,3,4,5,6", "-n", "4", "--arena-gb", "0.001", "--stats"},
		{"run", "--gguf", g, "--tokens", "1,2,3", "-n", "4", "--arena-experts", "40", "--moce", "--moce-lambda", "0.5", "--moce-max-rank", "12", "--stats"},
		{"bench", "--gguf", g, "-p", "4", "-n", "2", "-r", "1", "--warmup", "0", "--arena-gb", "0.001", "--moce"},
	} {
		_, stderr, status := runStrata(t, args...)
		if status != 0 || !strings.Contains(stderr, "strata: expert arena of") {
			t.Errorf("strata %s: status %d, stderr %q", strings.Join(args, " "), status, stderr)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--gguf", g, "--tokens", "1", "--moce-lambda", "0.5"}, "add --moce"},
		{[]string{"run", "--gguf", g, "--tokens", "1", "--arena-gb", "NaN"}, "--arena-gb must be"},
		{[]string{"run", "--gguf", g, "--tokens", "1", "--arena-gb", "1", "--arena-experts", "5"}, "two sizes"},
	} {
		if _, stderr, status := runStrata(t, c.args...); status != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("strata %s: status %d, stderr %q; want 2 and %q", strings.Join(c.args, " "), status, stderr, c.want)
		}
	}
}
