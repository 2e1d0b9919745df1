package strata_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/strata-llm/strata"

// packageImports maps every package of the module (its folder, "." for the
// root) to the module's packages its non-test files import, on every
// platform: build tags are not applied, so a darwin-only import counts.
func packageImports(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			name := d.Name()
			if path != "." && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != "." {
				return filepath.SkipDir // its own module (the avo generators)
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(path))
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if p == module {
				p = "."
			} else if rest, ok := strings.CutPrefix(p, module+"/"); ok {
				p = rest
			} else {
				continue
			}
			if !slices.Contains(out[pkg], p) {
				out[pkg] = append(out[pkg], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func under(pkg string, roots ...string) bool {
	for _, r := range roots {
		if pkg == r || strings.HasPrefix(pkg, r+"/") {
			return true
		}
	}
	return false
}

// testHelper packages serve tests only: no other code may import them.
func testHelper(pkg string) bool {
	return under(pkg, "internal/gentest", "internal/e2e", "internal/reftensor", "internal/bytemodel", "internal/asmcheck", "internal/testcache", "internal/sharedrefs")
}

// leaf packages depend on nothing of strata's but other leaves.
func leaf(pkg string) bool {
	return under(pkg, "graph", "models/quant", "models/ngram", "templates/msl") || under(pkg, "internal") && !testHelper(pkg)
}

// allowed says whether package from may import package to: the table of
// docs/architecture.md (models → gen → generated → runtime → cmd, with
// artifact the contract between generator and runtime).
func allowed(from, to string) bool {
	switch {
	case testHelper(from):
		return !under(to, "cmd") && to != "."
	case testHelper(to):
		return false
	case leaf(from):
		return leaf(to)
	case under(from, "models"): // models and the config folders models/<m>
		return leaf(to) || to == "models"
	case from == "artifact":
		return leaf(to) || to == "models"
	case from == "gen":
		return leaf(to) || to == "models" || to == "artifact"
	case under(from, "generated"):
		return to == "artifact"
	case under(from, "runtime"):
		if under(to, "gen", "templates/msl", "cmd") {
			return false
		}
		return runtimeAllowed(from, to)
	case from == "cmd/strata":
		return !under(to, "gen", "templates/msl", "cmd")
	case from == "cmd/stratagen":
		return leaf(to) || under(to, "models", "artifact", "gen", "runtime/arch", "runtime/resolve", "runtime/format/gguf", "runtime/weights", "runtime/format/pack", "runtime/format/safetensors", "runtime/format/mmap")
	case from == ".":
		return false // the root holds only the default model's files
	}
	return false
}

// runtimeAllowed is the runtime's rule by folder: each room of runtime/ may
// import the leaves, artifact, graph and models, and of the runtime only the
// rooms below it in the data flow. Folders are matched as prefixes, so a new
// package in a room inherits the room's rule.
func runtimeAllowed(from, to string) bool {
	if leaf(to) || under(to, "runtime/internal", "runtime/sysmem") {
		return true
	}
	base := to == "graph" || to == "models" || to == "artifact"
	switch {
	case under(from, "runtime/internal"), from == "runtime/sysmem":
		return false
	case under(from, "runtime/format"): // file formats: bytes on disk, nothing above them
		return under(to, "runtime/format")
	case from == "runtime/backend": // the contract the engine drives
		return to == "graph"
	case under(from, "runtime/backend"): // one backend: the contract, never the engine or another backend
		return to == "graph" || to == "artifact" || to == "runtime/backend"
	case from == "runtime/engine": // the decode loop: the contract, never a concrete backend
		return base || to == "runtime/backend" || strings.HasPrefix(to, "runtime/engine/") || under(to, "runtime/weights", "runtime/arch")
	case under(from, "runtime/engine"): // its parts (spec, stream, sample): leaves and each other
		return strings.HasPrefix(to, "runtime/engine/")
	case under(from, "runtime/arch"): // one file per architecture: the config and the file formats
		return base || under(to, "runtime/format")
	case from == "runtime/weights", from == "runtime/resolve":
		return base || under(to, "runtime/format", "runtime/arch", "runtime/weights")
	case under(from, "runtime/tools"): // offline tools (convert, imatrix)
		return base || under(to, "runtime/format", "runtime/arch", "runtime/weights", "runtime/tools")
	case under(from, "runtime/text"): // tokenizer, chat templates, detokenized streams
		return under(to, "runtime/text", "runtime/format")
	case from == "runtime/serve": // the HTTP API over the engine and the text side
		return under(to, "runtime/engine", "runtime/text")
	case from == "runtime/eval": // scoring a loaded model on text: the engine, the base file
		return base || under(to, "runtime/engine", "runtime/format/safetensors")
	case from == "runtime/calibrate": // imatrix statistics from the cpu kernels, named as convert writes
		return base || under(to, "runtime/engine", "runtime/backend/cpu", "runtime/tools/imatrix", "runtime/tools/convert")
	case from == "runtime/bench": // speed of configurations side by side: each one loaded
		return base || under(to, "runtime/load", "runtime/engine")
	case from == "runtime/load": // the wiring: anything of the runtime, the embedded default
		return base || under(to, "runtime", "generated") || to == "."
	}
	return false
}

// TestImportGraph holds the module to docs/architecture.md's table of who may
// import whom: it fails on any other edge, naming it.
func TestImportGraph(t *testing.T) {
	imports := packageImports(t)
	if len(imports) < 30 {
		t.Fatalf("found only %d packages: is the test running from the module root?", len(imports))
	}
	for _, pkg := range slices.Sorted(func(yield func(string) bool) {
		for p := range imports {
			if !yield(p) {
				return
			}
		}
	}) {
		for _, to := range imports[pkg] {
			if !allowed(pkg, to) {
				t.Errorf("%s imports %s: not allowed by docs/architecture.md", pkg, to)
			}
		}
	}
}

// The rules catch what they are for: a runtime package importing the
// generator, a model config importing the runtime, a generated package
// importing more than the contract.
func TestImportRulesRefuse(t *testing.T) {
	for _, e := range [][2]string{{"runtime/engine", "gen"}, {"runtime/load", "templates/msl"}, {"models", "runtime/format/gguf"},
		{"generated/tiny-go", "graph"}, {"cmd/strata", "gen"}, {"runtime/backend/cpu", "generated/tiny-go"}, {"graph", "models"},
		{"artifact", "runtime/format/gguf"}, {"cmd/stratagen", "runtime/load"}, {"runtime/engine", "internal/gentest"},
		{"cmd/strata", "internal/reftensor"}, {"runtime/backend/cuda", "internal/e2e"}, {"internal/outfile", "runtime/format/gguf"},
		{"runtime/engine", "runtime/backend/cpu"}, {"runtime/backend/cpu", "runtime/engine"}, {"runtime/backend/cuda", "runtime/backend/mslemu"},
		{"runtime/backend", "runtime/engine"}, {"runtime/format/gguf", "runtime/weights"}, {"runtime/serve", "runtime/load"},
		{"runtime/engine/sample", "runtime/engine"}, {"runtime/text/chat", "runtime/engine"},
		{"runtime/eval", "runtime/load"}, {"runtime/eval", "runtime/backend/cpu"}, {"runtime/calibrate", "runtime/load"},
		{"runtime/bench", "runtime/backend/metal"}, {"runtime/engine", "runtime/eval"}, {"runtime/arch", "runtime/weights"},
		{"runtime/format/gguf", "runtime/arch"}} {
		if allowed(e[0], e[1]) {
			t.Errorf("%s → %s is allowed", e[0], e[1])
		}
	}
}
