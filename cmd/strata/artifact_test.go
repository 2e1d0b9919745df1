package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/internal/gentest"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/resolve"
)

// The tests synthesize, convert and open models under their own options,
// for which no artifact is checked in: they generate them in process
// (strata itself says which stratagen command to run instead).
func init() { generate = gentest.Generate }

// noGenerate turns the in-process generation off, for a test of what a
// user sees; it returns what turns it on again.
func noGenerate() func() {
	generate = nil
	return func() { generate = gentest.Generate }
}

// stratagenGGUF is stratagen generate --gguf path: the artifact of the
// file's config and formats, written beside it.
func stratagenGGUF(t *testing.T, path string) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, _, err := resolve.GGUF(f, nil, resolve.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := gen.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(artifact.DirFor(true, path)); err != nil {
		t.Fatal(err)
	}
}

// The runtime binary links no generator: not gen, not jennifer, not
// x/tools (the artifacts it runs are data, generated ahead by stratagen).
func TestRuntimeLinksNoGenerator(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 || !strings.Contains(string(out), "github.com/strata-llm/strata/runtime/load") {
		t.Fatalf("go list -deps listed %d packages, not strata's:\n%s", len(deps), out)
	}
	for _, d := range deps {
		for _, banned := range []string{"github.com/strata-llm/strata/gen", "github.com/dave/jennifer", "golang.org/x/tools"} {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("cmd/strata links %s", d)
			}
		}
	}
}
