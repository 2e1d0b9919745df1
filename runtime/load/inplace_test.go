package load_test

import (
	"testing"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/weights"
)

// Weights the GGUF stores as the window graphs read them are used where
// they lie in the mapped file, on the cpu backend and through the Metal
// backend (wrapped as no-copy buffers); the logits equal those of the same
// file loaded by copying, bit for bit, on the same backend. Tensors the
// file stores transformed (qwen3next's norms as 1 + w) are copied into a
// compacted weights buffer. A backend that cannot wrap memory (mslemu)
// copies everything and says why.
func TestWeightsInPlace(t *testing.T) {
	dir := t.TempDir()
	ref := e2e.Ref(t, "tiny-a")
	for _, c := range []struct {
		oracle, plan, backend string
	}{
		{"tiny-a", "", load.BackendCPU},
		{"tiny-a", "trunk=q8_0,embed=q8_0,head=q6_k", load.BackendCPU},
		{"q4-a", "", load.BackendCPU},
		{"tiny-a", "", load.BackendMetalEmu},
		{"tiny-a", "", load.BackendMSLEmu},
	} {
		path, _ := e2e.ConvertOracle(t, c.oracle, c.plan, dir)
		opt := load.Options{AllLogits: true, PrefillRows: 8, Backend: c.backend}
		if c.backend != load.BackendCPU {
			e2e.RequireEmulator(t)
		}
		opt.Metal.ICB = c.backend == load.BackendMetalEmu // the ICB plan is rebuilt after the move
		copied := opt
		copied.CopyWeights = true
		base := e2e.GGUF(t, path, load.GGUFOptions{Options: copied})
		l := e2e.GGUF(t, path, load.GGUFOptions{Options: opt})
		st := l.Model.Weights()
		name := c.oracle + " " + c.plan + " on " + c.backend
		if bs := base.Model.Weights(); bs.InPlace != 0 || bs.Why == "" {
			t.Fatalf("%s, copying: %+v", name, bs)
		}
		if c.backend == load.BackendMSLEmu {
			if st.InPlace != 0 || st.Why == "" {
				t.Fatalf("%s: %+v, want every weight copied with a reason", name, st)
			}
			continue
		}
		if st.InPlace == 0 || st.Wrapped == 0 || st.Staged != 0 {
			t.Fatalf("%s: %+v, want weights wrapped in place", name, st)
		}
		if c.oracle == "tiny-a" && st.Copied == 0 {
			t.Errorf("%s: nothing copied, but qwen3next norms are stored as 1 + w", name)
		}
		tokens := ref.Tokens[:24]
		if c.oracle != "tiny-a" {
			tokens = e2e.Ref(t, c.oracle).Tokens[:24]
		}
		wantT, wantL := e2e.DecodeAll(t, base, tokens, 8)
		gotT, gotL := e2e.DecodeAll(t, l, tokens, 8)
		e2e.SameRun(t, name, gotT, wantT, gotL, wantL)
		t.Logf("%s: %d bytes in place (%d stretches), %d copied", name, st.InPlace, st.Wrapped, st.Copied)
	}
}

// misaligned claims every tensor sits 8 bytes later in the file than it
// does: a file written with general.alignment = 8.
type misaligned struct{ *weights.GGUF }

func (m misaligned) Mapped(spec models.TensorSpec, format string) (int64, int64, bool) {
	off, size, ok := m.GGUF.Mapped(spec, format)
	return off + 8, size, ok
}

// A tensor whose start in the file is not 16-byte aligned (the kernels' vector
// loads assume it) is copied, not used in place.
func TestWeightsInPlaceNeedAlignment(t *testing.T) {
	path, _ := e2e.ConvertOracle(t, "tiny-a", "", t.TempDir())
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, err := weights.ConfigOf(f)
	if err != nil {
		t.Fatal(err)
	}
	src, err := weights.NewGGUF(f, c)
	if err != nil {
		t.Fatal(err)
	}
	graphs, err := gen.Windows(c, false)
	if err != nil {
		t.Fatal(err)
	}
	m, err := engine.LoadWith(c, graphs, misaligned{src}, cpu.Backend)
	if err != nil {
		t.Fatal(err)
	}
	if st := m.Weights(); st.InPlace != 0 || st.Why == "" {
		t.Fatalf("misaligned tensors: %+v, want every weight copied", st)
	}
}
