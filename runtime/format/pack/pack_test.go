package pack_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
)

// The streaming arena's reader threads read experts straight from a pack,
// and check each with the pack's checksums.
var (
	_ stream.Reader = (*pack.Reader)(nil)
	_               = stream.Options{Verify: (*pack.Reader)(nil).Verify}
)

const experts = 5

// stacked is a random [experts, rows, cols] tensor of ggml type typ.
func stacked(t *testing.T, rng *rand.Rand, name string, cols, rows int, typ string) gguf.Tensor {
	t.Helper()
	f, err := quant.Lookup(typ)
	if err != nil {
		t.Fatal(err)
	}
	gt, err := quant.GGMLTypeByCode(f.Code)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, experts*rows*f.Bytes(cols))
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	return gguf.Tensor{TensorInfo: gguf.TensorInfo{Name: name, Dims: []uint64{uint64(cols), uint64(rows), experts}, Type: gt}, Data: data}
}

// testFile writes a GGUF with split experts in block 0 and fused gate/up in
// block 3, in two formats, and the layers to pack.
func testFile(t *testing.T, dir string, seed uint64) (string, []pack.Layer) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	tensors := []gguf.Tensor{
		stacked(t, rng, "blk.0.ffn_gate_exps.weight", 64, 6, "f16"),
		stacked(t, rng, "blk.0.ffn_up_exps.weight", 64, 6, "f16"),
		stacked(t, rng, "blk.0.ffn_down_exps.weight", 32, 64, "q8_0"),
		stacked(t, rng, "blk.3.ffn_gate_up_exps.weight", 256, 10, "iq2_xs"),
		stacked(t, rng, "blk.3.ffn_down_exps.weight", 32, 256, "iq4_nl"),
	}
	path := filepath.Join(dir, "m.gguf")
	if err := gguf.WriteFile(path, []gguf.KV{{Key: "general.architecture", Value: "test"}}, tensors); err != nil {
		t.Fatal(err)
	}
	return path, []pack.Layer{
		{Block: 0, Parts: []pack.Part{{Tensor: "blk.0.ffn_gate_exps.weight", Rows: 6}, {Tensor: "blk.0.ffn_up_exps.weight", Rows: 6}, {Tensor: "blk.0.ffn_down_exps.weight", Rows: 64}}},
		{Block: 3, Parts: []pack.Part{{Tensor: "blk.3.ffn_gate_up_exps.weight", Rows: 5}, {Tensor: "blk.3.ffn_gate_up_exps.weight", Row: 5, Rows: 5}, {Tensor: "blk.3.ffn_down_exps.weight", Rows: 256}}},
	}
}

func writePack(t *testing.T, path string, layers []pack.Layer) *gguf.File {
	t.Helper()
	g, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	var last int64
	if err := pack.Write(pack.Path(path), g, layers, func(done, total int64) { last = total - done }); err != nil {
		t.Fatal(err)
	}
	if last != 0 {
		t.Errorf("progress ended %d bytes short", last)
	}
	return g
}

// An entry is one page-aligned read holding gate, up and down at 256-byte
// boundaries, byte for byte the GGUF's slices.
func TestPackLayout(t *testing.T) {
	path, layers := testFile(t, t.TempDir(), 1)
	g := writePack(t, path, layers)
	r, err := pack.Open(pack.Path(path), g)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Experts() != experts || len(r.Blocks()) != 2 || r.Blocks()[1] != 3 {
		t.Fatalf("experts %d, blocks %v", r.Experts(), r.Blocks())
	}
	prevEnd := int64(pack.PageSize)
	for _, l := range layers {
		parts, _ := r.Parts(l.Block)
		for e := 0; e < experts; e++ {
			en, err := r.Entry(l.Block, e)
			if err != nil {
				t.Fatal(err)
			}
			if en.Offset%pack.PageSize != 0 || en.Offset != prevEnd {
				t.Errorf("block %d expert %d at %d, want the page after %d", l.Block, e, en.Offset, prevEnd)
			}
			prevEnd = en.Offset + int64((en.Length+pack.PageSize-1)/pack.PageSize*pack.PageSize)
			buf := make([]byte, r.SlotBytes())
			if err := r.ReadExpert(l.Block, e, 0, buf[:en.Length]); err != nil {
				t.Fatal(err)
			}
			if err := r.Verify(l.Block, e, buf); err != nil {
				t.Error(err)
			}
			want := 0
			for _, p := range parts {
				if p.Offset%pack.PartAlign != 0 || p.Offset < want {
					t.Errorf("part %s rows %d at %d: not 256-aligned after the previous part", p.Tensor, p.Row, p.Offset)
				}
				want = p.Offset + p.Length
				tt, _ := g.Tensor(p.Tensor)
				slice := int(tt.Dims[1]) * int(tt.RowBytes())
				src := tt.Data[e*slice+p.Row*int(tt.RowBytes()):][:p.Length]
				if !bytes.Equal(buf[p.Offset:p.Offset+p.Length], src) {
					t.Errorf("block %d expert %d: part %s rows [%d, %d) differs from the GGUF", l.Block, e, p.Tensor, p.Row, p.Row+p.Rows)
				}
			}
			if want != en.Length {
				t.Errorf("entry length %d, parts end at %d", en.Length, want)
			}
		}
	}
	if err := r.Check(g, nil); err != nil {
		t.Error(err)
	}
	if _, err := r.Entry(1, 0); err == nil {
		t.Error("an expert of a block the pack lacks was found")
	}
	if err := r.ReadExpert(0, experts, 0, make([]byte, 8)); err == nil {
		t.Error("expert past the last one was read")
	}
	// Reader threads share one Reader.
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 256)
			for e := 0; e < experts; e++ {
				if err := r.ReadExpert(3, e, 128, buf); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
}

// A pack is refused by any other GGUF: other weights, other shapes.
func TestPackStale(t *testing.T) {
	dir := t.TempDir()
	path, layers := testFile(t, dir, 1)
	writePack(t, path, layers)
	packBytes, err := os.ReadFile(pack.Path(path))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := testFile(t, t.TempDir(), 2) // same shapes, other weights
	g, err := gguf.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	_, err = pack.Open(pack.Path(path), g)
	if !errors.Is(err, pack.ErrStale) || !strings.Contains(err.Error(), "expert weights changed") {
		t.Errorf("pack of other weights: %v", err)
	}
	// A pack with a bad header checksum is corrupt, not stale.
	bad := append([]byte(nil), packBytes...)
	bad[20] ^= 1
	p := filepath.Join(dir, "bad.experts")
	if err := os.WriteFile(p, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := pack.Open(p, g); err == nil || errors.Is(err, pack.ErrStale) || !strings.Contains(err.Error(), "header checksum") {
		t.Errorf("corrupt header: %v", err)
	}
	// Layers naming a tensor the GGUF lacks cannot be packed.
	if err := pack.Write(filepath.Join(dir, "x.experts"), g, []pack.Layer{{Block: 9, Parts: []pack.Part{{Tensor: "blk.9.nope", Rows: 1}}}}, nil); err == nil || !strings.Contains(err.Error(), "no tensor blk.9.nope") {
		t.Errorf("missing tensor: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.experts")); err == nil {
		t.Error("a failed pack left its file behind")
	}
}
