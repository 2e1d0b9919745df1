package pack_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
)

// A slot sized for the largest block's entry (blocks of different formats
// have entries of different sizes) reads a smaller entry's bytes, then zeros,
// even over stale slot contents.
func TestReadExpertPastEntry(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 1))
	path := filepath.Join(t.TempDir(), "m.gguf")
	tensors := []gguf.Tensor{ // block 1's experts take more pages than block 0's
		stacked(t, rng, "blk.0.ffn_gate_exps.weight", 64, 6, "q8_0"),
		stacked(t, rng, "blk.0.ffn_up_exps.weight", 64, 6, "q8_0"),
		stacked(t, rng, "blk.0.ffn_down_exps.weight", 32, 64, "q8_0"),
		stacked(t, rng, "blk.1.ffn_gate_exps.weight", 64, 6, "f32"),
		stacked(t, rng, "blk.1.ffn_up_exps.weight", 64, 6, "f32"),
		stacked(t, rng, "blk.1.ffn_down_exps.weight", 32, 512, "f32"),
	}
	if err := gguf.WriteFile(path, []gguf.KV{{Key: "general.architecture", Value: "test"}}, tensors); err != nil {
		t.Fatal(err)
	}
	var layers []pack.Layer
	for b := 0; b < 2; b++ {
		n := func(s string) string { return fmt.Sprintf("blk.%d.ffn_%s_exps.weight", b, s) }
		layers = append(layers, pack.Layer{Block: b, Parts: []pack.Part{{Tensor: n("gate"), Rows: 6}, {Tensor: n("up"), Rows: 6}, {Tensor: n("down"), Rows: int(tensors[3*b+2].Dims[1])}}})
	}
	g := writePack(t, path, layers)
	r, err := pack.Open(pack.Path(path), g)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	small, _ := r.Entry(0, 1)
	big, _ := r.Entry(1, 1)
	if small.Length >= big.Length {
		t.Fatalf("entries of %d and %d bytes, want block 0's smaller", small.Length, big.Length)
	}
	slot := bytes.Repeat([]byte{0xAA}, r.SlotBytes())
	if err := r.ReadExpert(0, 1, 0, slot); err != nil {
		t.Fatal(err)
	}
	if err := r.Verify(0, 1, slot); err != nil {
		t.Error(err)
	}
	tail := (small.Length + pack.PageSize - 1) / pack.PageSize * pack.PageSize
	if tail >= len(slot) {
		t.Fatalf("entry of %d bytes fills the %d-byte slot", small.Length, len(slot))
	}
	if !bytes.Equal(slot[tail:], make([]byte, len(slot)-tail)) {
		t.Error("the slot past the entry's last page is not zero")
	}
	if err := r.ReadExpert(0, 1, -1, slot[:8]); err == nil {
		t.Error("a negative offset was accepted")
	}
}
