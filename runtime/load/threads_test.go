package load_test

import (
	"runtime"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/weights"
)

// The cpu backend a model gets splits its kernels' work into
// Options.Threads goroutines, else the config's runtime.threads, else one
// per core; models loaded side by side keep their own counts (the count is
// the backend's, not the process's).
func TestThreadsReachTheBackend(t *testing.T) {
	threadsOf := func(l *load.Loaded) int {
		t.Helper()
		h, ok := l.Model.Backend().(*cpu.Host)
		if !ok {
			t.Fatalf("backend %T, not cpu", l.Model.Backend())
		}
		if l.Threads != h.Threads() {
			t.Errorf("Loaded.Threads %d, the backend's %d", l.Threads, h.Threads())
		}
		return h.Threads()
	}
	three := e2e.HF(t, "../../testdata/oracles/tiny-a", load.Options{Threads: 3})
	perCore := e2e.HF(t, "../../testdata/oracles/tiny-a", load.Options{})
	if got := threadsOf(three); got != 3 {
		t.Errorf("Threads 3: the backend has %d, after another model was loaded", got)
	}
	if got := threadsOf(perCore); got != runtime.GOMAXPROCS(0) {
		t.Errorf("no Threads, runtime.threads 0: %d, want one per core (%d)", got, runtime.GOMAXPROCS(0))
	}

	path, _ := e2e.ConvertOracle(t, "tiny-a", "", t.TempDir())
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := weights.ConfigOf(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	c.Runtime.Threads = 2
	if got := threadsOf(e2e.GGUF(t, path, load.GGUFOptions{Config: c})); got != 2 {
		t.Errorf("runtime.threads 2: the backend has %d", got)
	}
	if got := threadsOf(e2e.GGUF(t, path, load.GGUFOptions{Config: c, Options: load.Options{Threads: 5}})); got != 5 {
		t.Errorf("runtime.threads 2, Threads 5: the backend has %d", got)
	}
}
