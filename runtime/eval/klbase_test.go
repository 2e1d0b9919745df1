package eval

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// TestKLBase: a missing file is made from the rows added; reopened with the
// same key, each row is compared with the base's in order; another key, vocabulary or tensor is refused, as is
// a run scoring more rows than the base has.
func TestKLBase(t *testing.T) {
	path := filepath.Join(t.TempDir(), "base.safetensors")
	key := WindowsKey([]int{1, 2, 3, 4}, []int{0, 2}, 2, 0)
	half := LogSoftmax([]float32{0, 0})
	skew := []float32{float32(math.Log(0.25)), float32(math.Log(0.75))}
	kl, err := OpenKLBase(path, key, 2)
	if err != nil {
		t.Fatal(err)
	}
	var sc Scores
	for _, lp := range [][]float32{half, skew} {
		if err := kl.Add(&sc, lp); err != nil {
			t.Fatal(err)
		}
	}
	if !kl.Saving() || kl.Rows() != 2 {
		t.Fatalf("saving %v, %d rows; want a new base of 2", kl.Saving(), kl.Rows())
	}
	if _, _, _, _, ok := sc.KL(); ok {
		t.Error("a base being made compared with something")
	}
	if err := kl.Save("m"); err != nil {
		t.Fatal(err)
	}

	kl, err = OpenKLBase(path, key, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer kl.Close()
	if kl.Saving() {
		t.Fatal("an existing base is being made again")
	}
	sc = Scores{}
	for _, lp := range [][]float32{half, half} {
		if err := kl.Add(&sc, lp); err != nil {
			t.Fatal(err)
		}
	}
	// The base's second row against (1/2, 1/2): KL((1/4,3/4) ‖ (1/2,1/2)) =
	// ¼ln(1/2) + ¾ln(3/2), another top token; the first row is at 0.
	want := 0.25*math.Log(0.5) + 0.75*math.Log(1.5)
	mean, _, mx, same, ok := sc.KL()
	if !ok || math.Abs(mean-want/2) > 1e-6 || math.Abs(mx-want) > 1e-6 || same != 0.5 {
		t.Errorf("KL mean %v max %v same %v; want %v, %v, 0.5", mean, mx, same, want/2, want)
	}
	if err := kl.Add(&sc, half); err == nil || !strings.Contains(err.Error(), "has 2 rows; this run scores more") {
		t.Errorf("a third row: %v", err)
	}

	for _, c := range []struct {
		key   string
		vocab int
		want  string
	}{
		{WindowsKey([]int{1, 2, 3, 5}, []int{0, 2}, 2, 0), 2, "scored other text or windows"},
		{key, 3, "expected tensor logprobs F32 [rows, 3]"},
	} {
		if _, err := OpenKLBase(path, c.key, c.vocab); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("key %q vocab %d: %v; want an error naming %s and %q", c.key, c.vocab, err, path, c.want)
		}
	}
	other := filepath.Join(t.TempDir(), "other.safetensors")
	if err := safetensors.WriteFile(other, []safetensors.Tensor{{Name: "logits", DType: "F32", Shape: []int{1, 2}, Data: make([]byte, 8)}}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenKLBase(other, key, 2); err == nil || !strings.Contains(err.Error(), "expected tensor logprobs") {
		t.Errorf("a file without logprobs: %v", err)
	}
}

// WindowsKey changes with every part of what was scored.
func TestWindowsKey(t *testing.T) {
	base := WindowsKey([]int{1, 2, 3, 4}, []int{0, 2}, 2, 0)
	for _, k := range []string{
		WindowsKey([]int{1, 2, 3, 5}, []int{0, 2}, 2, 0),
		WindowsKey([]int{1, 2, 3, 4}, []int{0, 1}, 2, 0),
		WindowsKey([]int{1, 2, 3, 4}, []int{0, 2}, 3, 0),
		WindowsKey([]int{1, 2, 3, 4}, []int{0, 2}, 2, 1),
		WindowsKey([]int{1, 2, 3, 4, 0}, []int{0, 2}, 2, 0),
	} {
		if k == base {
			t.Errorf("%s: the same key for other windows", k)
		}
	}
	if base != WindowsKey([]int{1, 2, 3, 4}, []int{0, 2}, 2, 0) {
		t.Error("the key is not a function of what was scored")
	}
}

// Arena's rates, by hand over the trace 1 2 1 3 1 2 with 2 slots: LRU hits
// the 2nd 1 and the 3rd (2 of 6), three distinct experts bound the hit rate
// at 1 − 3/6, and the arena's own hits count its late read-aheads.
func TestArena(t *testing.T) {
	h := Arena(stream.Stats{Hits: 2, Late: 1, Misses: 3}, []int{1, 2, 1, 3, 1, 2}, 2, 4)
	if h.Arena != 2 || h.Accesses != 6 || h.Hit != 0.5 || math.Abs(h.LRU-2.0/6) > 1e-12 || h.Compulsory != 0.5 || h.MissesPerToken != 0.75 {
		t.Errorf("%+v", h)
	}
	if h.Belady < h.LRU || h.Belady > h.Compulsory {
		t.Errorf("Belady MIN %v outside [LRU %v, compulsory bound %v]", h.Belady, h.LRU, h.Compulsory)
	}
	if h := Arena(stream.Stats{}, nil, 4, 1); h.Hit != 0 || h.Accesses != 0 {
		t.Errorf("no accesses: %+v", h)
	}
}
