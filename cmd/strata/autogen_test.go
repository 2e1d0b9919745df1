package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The installed pair, as go install ./cmd/... leaves it: strata and
// stratagen in one folder, nothing on PATH, a fresh user cache. The first
// run of a model without an artifact generates one into the cache, says so
// and decodes the reference tokens; the second finds it there; with
// --no-generate a run needing another artifact stops naming the command.
func TestInstalledRunGeneratesMissingArtifact(t *testing.T) {
	if testing.Short() {
		t.Skip("builds strata and stratagen")
	}
	bin := t.TempDir()
	for _, cmd := range []string{"strata", "stratagen"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, cmd), "github.com/strata-llm/strata/cmd/"+cmd).CombinedOutput(); err != nil {
			t.Fatalf("go build ./cmd/%s: %v\n%s", cmd, err, out)
		}
	}
	const oracle = "../../testdata/oracles/tiny-a"
	cache := t.TempDir()
	strata := func(args ...string) (string, string, error) {
		cmd := exec.Command(filepath.Join(bin, "strata"), args...)
		cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+cache, "HOME="+t.TempDir(), "PATH=")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	greedy := refInts(t, oracle, "greedy_tokens")
	want := joinInts(greedy[16:24], " ")
	run := []string{"run", "--hf", oracle, "--tokens", joinInts(greedy[:16], ","), "-n", "8"} // the 16-token prompt

	stdout, stderr, err := strata(run...)
	if err != nil || strings.TrimSpace(stdout) != want {
		t.Fatalf("first run: %v, stdout %q (want %q)\n%s", err, stdout, want, stderr)
	}
	if !strings.Contains(stderr, "generated the artifact of tiny-a") || !strings.Contains(stderr, filepath.Join(bin, "stratagen")) ||
		!strings.Contains(stderr, filepath.Join(cache, "strata", "artifacts")) {
		t.Errorf("first run: no line saying stratagen generated the artifact into the cache:\n%s", stderr)
	}

	stdout, stderr, err = strata(run...)
	if err != nil || strings.TrimSpace(stdout) != want || strings.Contains(stderr, "generated the artifact") {
		t.Errorf("second run: %v, stdout %q (want %q), want no generation:\n%s", err, stdout, want, stderr)
	}

	_, stderr, err = strata(append(run, "--context", "256", "--no-generate")...)
	if err == nil || !strings.Contains(stderr, "run  stratagen generate --hf "+oracle+" --context 256") {
		t.Errorf("--no-generate: %v, want the refusal naming the command:\n%s", err, stderr)
	}
}
