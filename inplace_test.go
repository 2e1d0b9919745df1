package strata

import (
	"testing"
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
	ref := ref0(t, "tiny-a")
	for _, c := range []struct {
		oracle, plan, backend string
	}{
		{"tiny-a", "", BackendCPU},
		{"tiny-a", "trunk=q8_0,embed=q8_0,head=q6_k", BackendCPU},
		{"q4-a", "", BackendCPU},
		{"tiny-a", "", BackendMetalEmu},
		{"tiny-a", "", BackendMSLEmu},
	} {
		path, _ := convertOracle(t, c.oracle, c.plan, dir)
		opt := HFOptions{AllLogits: true, PrefillRows: 8, Backend: c.backend}
		if c.backend != BackendCPU {
			requireEmulator(t)
		}
		opt.Metal.ICB = c.backend == BackendMetalEmu // the ICB plan is rebuilt after the move
		copied := opt
		copied.CopyWeights = true
		base := openGGUF(t, path, GGUFOptions{HFOptions: copied})
		l := openGGUF(t, path, GGUFOptions{HFOptions: opt})
		st := l.Model.Weights()
		name := c.oracle + " " + c.plan + " on " + c.backend
		if bs := base.Model.Weights(); bs.InPlace != 0 || bs.Why == "" {
			t.Fatalf("%s, copying: %+v", name, bs)
		}
		if c.backend == BackendMSLEmu {
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
		tokens := ref.tokens[:24]
		if c.oracle != "tiny-a" {
			tokens = ref0(t, c.oracle).tokens[:24]
		}
		wantT, wantL := decodeAll(t, base, tokens, 8)
		gotT, gotL := decodeAll(t, l, tokens, 8)
		sameRun(t, name, gotT, wantT, gotL, wantL)
		t.Logf("%s: %d bytes in place (%d stretches), %d copied", name, st.InPlace, st.Wrapped, st.Copied)
	}
}
