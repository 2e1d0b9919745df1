package backend_test

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/strata-llm/strata/"

// imports lists the strata packages the non-test files of runtime/<dir>
// import, on every platform (build tags are not applied).
func imports(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in runtime/%s", dir)
	}
	var out []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out, rest) {
				out = append(out, rest)
			}
		}
	}
	return out
}

// The layering below the engine: engine → backend ← cpu, mslemu, metal,
// cuda. The engine knows no concrete backend, a backend neither the engine
// nor another backend, and the contract only the graph.
func TestLayering(t *testing.T) {
	backends := []string{"runtime/cpu", "runtime/mslemu", "runtime/metal", "runtime/cuda"}
	check := func(dir string, forbidden []string) {
		got := imports(t, dir)
		if !slices.Contains(got, "runtime/backend") {
			t.Errorf("runtime/%s does not import runtime/backend (imports %v)", dir, got)
		}
		for _, f := range forbidden {
			if slices.Contains(got, f) {
				t.Errorf("runtime/%s imports %s", dir, f)
			}
		}
	}
	check("engine", backends)
	for _, b := range backends {
		check(strings.TrimPrefix(b, "runtime/"), append([]string{"runtime/engine"}, slices.DeleteFunc(slices.Clone(backends), func(o string) bool { return o == b })...))
	}
	if got := imports(t, "backend"); !slices.Equal(got, []string{"graph"}) {
		t.Errorf("runtime/backend imports %v, want only graph", got)
	}
}
