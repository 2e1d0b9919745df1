// Package e2e is for tests only: what the end-to-end suites of the
// backends, the engine and the loader share. It opens the vendored oracles
// (testdata/oracles) and tiny-go (models/tiny-go) through runtime/load with
// the in-process generator (internal/gentest) as Options.Generate, converts
// oracles to GGUF as `strata convert` does, loads their float64 references
// and checks logits against them with the suites' bounds.
package e2e

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/strata-llm/strata/internal/gentest"
	"github.com/strata-llm/strata/runtime/load"
)

var root struct {
	once sync.Once
	dir  string
	err  error
}

// Path is a path in the module (its root joined with elem), wherever the
// test runs from; it panics outside the module, where no test can run.
func Path(elem ...string) string {
	root.once.Do(func() { root.dir, root.err = gentest.ModuleRoot() })
	if root.err != nil {
		panic(root.err)
	}
	return filepath.Join(append([]string{root.dir}, elem...)...)
}

// OracleDir is the folder of a vendored HF oracle (testdata/oracles/name).
func OracleDir(name string) string { return Path("testdata", "oracles", name) }

// WithGenerator is opt with the in-process generator, when it has none:
// the suites open models under windows, contexts and formats no artifact
// is checked in for.
func WithGenerator(opt load.Options) load.Options {
	if opt.Generate == nil {
		opt.Generate = gentest.Generate
	}
	return opt
}

// HF opens an HF checkpoint folder with the generator, closed when the
// test ends.
func HF(t testing.TB, dir string, opt load.Options) *load.Loaded {
	t.Helper()
	l, err := load.HF(dir, WithGenerator(opt))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// GGUF opens a GGUF file with the generator, closed when the test ends.
func GGUF(t testing.TB, path string, opt load.GGUFOptions) *load.Loaded {
	t.Helper()
	opt.Options = WithGenerator(opt.Options)
	l, err := load.GGUF(path, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// Main runs a package's tests and removes what the suites left for the
// whole run (ConvertOracle's files), then runs the package's own cleanups:
// func TestMain(m *testing.M) { e2e.Main(m) }.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	removeConversions()
	for _, c := range cleanups {
		c()
	}
	os.Exit(code)
}
