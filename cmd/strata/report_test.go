package main

import (
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// statLines are the kinds of --stats report lines in stderr ("weights",
// "speculation", …).
func statLines(stderr string) []string {
	var kinds []string
	for _, m := range regexp.MustCompile(`(?m)^strata: (weights|speculation|spec gate|metal|streaming):`).FindAllStringSubmatch(stderr, -1) {
		kinds = append(kinds, m[1])
	}
	return kinds
}

// --stats reports the same with a text prompt as with token ids.
func TestStatsWithTextPrompt(t *testing.T) {
	_, ids, status := runStrata(t, "run", "--tokens", "1,2,3", "-n", "3", "--stats", "--arena-experts", "64")
	if status != 0 {
		t.Fatal(ids)
	}
	_, txt, status := runStrata(t, "run", "-p", "func main() {", "-n", "3", "--stats", "--arena-experts", "64")
	if status != 0 {
		t.Fatal(txt)
	}
	want := statLines(ids)
	if !slices.Contains(want, "weights") || !slices.Contains(want, "streaming") {
		t.Fatalf("--tokens --stats printed %v: %s", want, ids)
	}
	if got := statLines(txt); !slices.Equal(got, want) {
		t.Errorf("-p --stats printed %v, --tokens --stats %v:\n%s", got, want, txt)
	}
	if !strings.Contains(txt, "speculation: ") {
		t.Errorf("-p --stats: %s", txt)
	}
}

// --version gives the module version, the VCS revision and its commit time
// and the Go version; without a recorded revision, how to get one.
func TestVersionLine(t *testing.T) {
	bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/strata-llm/strata", Version: "v0.0.0-20261201214551-e6a7bbc00e65"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "e6a7bbc00e65c8be"}, {Key: "vcs.time", Value: "2026-12-01T21:45:51Z"}, {Key: "vcs.modified", Value: "true"}}}
	got := versionLine(bi, "", "go1.26.8", "linux/amd64")
	want := "strata v0.0.0-20261201214551-e6a7bbc00e65 (github.com/strata-llm/strata; revision e6a7bbc00e65c8be, committed 2026-12-01T21:45:51Z, with uncommitted changes), go1.26.8 linux/amd64"
	if got != want {
		t.Errorf("with VCS settings:\n got %s\nwant %s", got, want)
	}
	bi = &debug.BuildInfo{Main: debug.Module{Path: "github.com/strata-llm/strata", Version: "(devel)"}}
	if got := versionLine(bi, "", "go1.26.8", "linux/amd64"); !strings.Contains(got, "no VCS revision recorded") || !strings.HasSuffix(got, "go1.26.8 linux/amd64") {
		t.Errorf("without VCS settings: %s", got)
	}
	if got := versionLine(bi, "v1.2.0", "go1.26.8", "linux/amd64"); got != "strata v1.2.0 (github.com/strata-llm/strata), go1.26.8 linux/amd64" {
		t.Errorf("-X main.version: %s", got)
	}
	out, _, status := runStrata(t, "--version")
	if status != 0 || !strings.HasPrefix(out, "strata ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("strata --version: %d %q", status, out)
	}
}

// An empty -p is refused before the model loads (tiny-go adds no BOS), not
// replaced by the default prompt; strata tokenize reads -f and takes an
// empty -p as the empty text.
func TestEmptyPromptAndTokenizeFile(t *testing.T) {
	for _, args := range [][]string{{"-p", ""}, {"--prompt", ""}, {"-f", os.DevNull}, {"-p", "", "--system", "be brief"}} {
		_, stderr, status := runStrata(t, append([]string{"run"}, args...)...)
		if status != 2 || !strings.Contains(stderr, "is empty") || strings.Contains(stderr, "experts resident") {
			t.Errorf("run %q: status %d, %s", args, status, stderr)
		}
	}
	if _, stderr, status := runStrata(t, "run", "--tokens", ""); status != 2 || !strings.Contains(stderr, "--tokens: item 1") {
		t.Errorf("run --tokens '': status %d, %s", status, stderr)
	}
	f := filepath.Join(t.TempDir(), "x.go")
	if err := os.WriteFile(f, []byte("func main() {\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, status := runStrata(t, "tokenize", "--tokenizer", tinyTokenizer, "-f", f)
	want := joinInts(encodeWith(t, tinyTokenizer, "func main() {\n"), ",") + "\n"
	if status != 0 || out != want {
		t.Errorf("tokenize -f: %d %q %s; want %q", status, out, stderr, want)
	}
	withStdin("not this", func() { out, stderr, status = runStrata(t, "tokenize", "--tokenizer", tinyTokenizer, "-p", "") })
	if status != 0 || out != "\n" {
		t.Errorf("tokenize -p '': %d %q %s; want an empty line", status, out, stderr)
	}
}
