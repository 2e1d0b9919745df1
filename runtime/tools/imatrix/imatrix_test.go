package imatrix

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// le builds little-endian bytes: int → int32, uint64 → uint64, float32,
// string → raw bytes.
func le(vals ...any) []byte {
	var b []byte
	for _, v := range vals {
		switch v := v.(type) {
		case int:
			b = binary.LittleEndian.AppendUint32(b, uint32(int32(v)))
		case uint64:
			b = binary.LittleEndian.AppendUint64(b, v)
		case float32:
			b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
		case string:
			b = append(b, v...)
		}
	}
	return b
}

// legacyBytes is a legacy .dat file written by hand from llama-imatrix's
// layout: two entries (a plain tensor of 3 columns called twice, an expert
// tensor of 2 experts × 2 columns), the chunk count and the dataset name.
// Each value is mean x² × ncall.
func legacyBytes() []byte {
	return le(2,
		len("blk.0.attn_q.weight"), "blk.0.attn_q.weight", 2, 3, float32(2), float32(4), float32(6),
		len("blk.0.ffn_up_exps.weight"), "blk.0.ffn_up_exps.weight", 2, 4, float32(1), float32(3), float32(0), float32(0),
		2, len("calib.txt"), "calib.txt")
}

func TestLegacyRead(t *testing.T) {
	m, err := parseLegacy(legacyBytes())
	if err != nil {
		t.Fatal(err)
	}
	if m.ChunkCount != 2 || !slices.Equal(m.Datasets, []string{"calib.txt"}) || len(m.Entries) != 2 {
		t.Fatalf("chunks %d datasets %v entries %v", m.ChunkCount, m.Datasets, m.Names())
	}
	w, err := m.Weights("blk.0.attn_q.weight", 0)
	if err != nil || !slices.Equal(w, []float32{1, 2, 3}) {
		t.Errorf("attn_q weights %v (%v), want the stored values / ncall: [1 2 3]", w, err)
	}
	e := m.Entries["blk.0.ffn_up_exps.weight"]
	if err := e.SplitExperts("blk.0.ffn_up_exps.weight", 2); err != nil {
		t.Fatal(err)
	}
	if w, _ := m.Weights("blk.0.ffn_up_exps.weight", 0); !slices.Equal(w, []float32{0.5, 1.5}) {
		t.Errorf("expert 0 weights %v, want [0.5 1.5]", w)
	}
	if w, _ := m.Weights("blk.0.ffn_up_exps.weight", 1); !slices.Equal(w, []float32{0, 0}) {
		t.Errorf("expert 1 weights %v, want [0 0]", w)
	}
	if err := e.SplitExperts("x", 3); err == nil {
		t.Error("splitting 2×2 values into rows of 3 was accepted")
	}
	for _, bad := range [][]byte{nil, le(0), le(1, 5, "ab"), le(1, 1, "a", 1, 1000, float32(1))} {
		if _, err := parseLegacy(bad); err == nil {
			t.Errorf("%x: accepted", bad)
		}
	}
}

// TestLegacyWrite: what Write puts in a .dat file is the hand-written
// layout byte for byte (the expert entry's second expert saw no rows and
// stores zeros, the first mean x² × ncall).
func TestLegacyWrite(t *testing.T) {
	m := &Matrix{ChunkCount: 2, Datasets: []string{"calib.txt"}, Entries: map[string]*Entry{
		"blk.0.attn_q.weight":      {Cols: 3, Sums: []float32{10, 20, 30}, Counts: []float32{10}},
		"blk.0.ffn_up_exps.weight": {Cols: 2, Sums: []float32{2, 6, 0, 0}, Counts: []float32{4, 0}},
	}}
	path := filepath.Join(t.TempDir(), "m.dat")
	if err := Write(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := legacyBytes(); !bytes.Equal(got, want) {
		t.Errorf("wrote\n%x\nwant\n%x", got, want)
	}
	back, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if w, _ := back.Weights("blk.0.attn_q.weight", 0); !slices.Equal(w, []float32{1, 2, 3}) {
		t.Errorf("read back %v", w)
	}
}

// ggufBytes is a GGUF-based imatrix written by hand (GGUF v3, alignment
// 32): general.type, the dataset list, chunk count and size; one tensor
// pair NAME.in_sum2 f32 [2, 2] and NAME.counts f32 [1, 2].
func ggufBytes() []byte {
	str := func(s string) []byte { return append(le(uint64(len(s))), s...) }
	var b []byte
	b = append(b, le("GGUF", 3, uint64(2), uint64(4))...)
	b = append(b, str("general.type")...)
	b = append(b, le(8)...)
	b = append(b, str("imatrix")...)
	b = append(b, str("imatrix.datasets")...)
	b = append(b, le(9, 8, uint64(1))...)
	b = append(b, str("calib.txt")...)
	b = append(b, str("imatrix.chunk_count")...)
	b = append(b, le(4, 3)...)
	b = append(b, str("imatrix.chunk_size")...)
	b = append(b, le(4, 512)...)
	b = append(b, str("blk.1.ffn_down_exps.weight.in_sum2")...)
	b = append(b, le(2, uint64(2), uint64(2), 0, uint64(0))...)
	b = append(b, str("blk.1.ffn_down_exps.weight.counts")...)
	b = append(b, le(2, uint64(1), uint64(2), 0, uint64(32))...)
	for len(b)%32 != 0 {
		b = append(b, 0)
	}
	b = append(b, le(float32(8), float32(4), float32(3), float32(9))...)
	b = append(b, make([]byte, 16)...) // to the next 32-byte boundary
	b = append(b, le(float32(4), float32(3))...)
	return append(b, make([]byte, 24)...) // ggml pads the last tensor's data too
}

func TestGGUFRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := os.WriteFile(path, ggufBytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.ChunkCount != 3 || m.ChunkSize != 512 || !slices.Equal(m.Datasets, []string{"calib.txt"}) {
		t.Errorf("chunks %d × %d, datasets %v", m.ChunkCount, m.ChunkSize, m.Datasets)
	}
	for mat, want := range [][]float32{{2, 1}, {1, 3}} {
		if w, err := m.Weights("blk.1.ffn_down_exps.weight", mat); err != nil || !slices.Equal(w, want) {
			t.Errorf("expert %d: %v (%v), want in_sum2/counts %v", mat, w, err, want)
		}
	}
	if _, err := m.Weights("blk.1.ffn_down_exps.weight", 2); err == nil {
		t.Error("expert 2 of 2 accepted")
	}
}

// TestGGUFWrite: Write's GGUF file is the hand-written one byte for byte.
func TestGGUFWrite(t *testing.T) {
	m := &Matrix{ChunkCount: 3, ChunkSize: 512, Datasets: []string{"calib.txt"}, Entries: map[string]*Entry{
		"blk.1.ffn_down_exps.weight": {Cols: 2, Sums: []float32{8, 4, 3, 9}, Counts: []float32{4, 3}},
	}}
	path := filepath.Join(t.TempDir(), "m.imatrix")
	if err := Write(path, m); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := ggufBytes(); !bytes.Equal(got, want) {
		t.Errorf("wrote\n%x\nwant\n%x", got, want)
	}
}

// TestCollector: Σx² per column and row counts per expert, hand-computed,
// and a column order applied on export.
func TestCollector(t *testing.T) {
	c := NewCollector()
	c.Activations("experts.up", 1, 3, 2, []float32{1, 2, 3, -4})
	c.Activations("experts.up", 1, 3, 2, []float32{0.5, 0})
	c.Activations("experts.up", 0, 3, 2, []float32{2, 2})
	m, err := c.Matrix(func(string) []Target { return []Target{{Name: "a"}, {Name: "b", Perm: []int{1, 0}}} })
	if err != nil {
		t.Fatal(err)
	}
	a, b := m.Entries["a"], m.Entries["b"]
	if !slices.Equal(a.Sums, []float32{4, 4, 10.25, 20, 0, 0}) || !slices.Equal(a.Counts, []float32{1, 3, 0}) {
		t.Errorf("a: sums %v counts %v", a.Sums, a.Counts)
	}
	if !slices.Equal(b.Sums, []float32{4, 4, 20, 10.25, 0, 0}) {
		t.Errorf("b (columns swapped): sums %v", b.Sums)
	}
	if w, _ := m.Weights("a", 2); w != nil {
		t.Errorf("an expert with no rows has weights %v, want none", w)
	}
}
