package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models/quant"
)

func ggmlType(t testing.TB, code int) quant.GGMLType {
	t.Helper()
	ty, err := quant.GGMLTypeByCode(code)
	if err != nil {
		t.Fatal(err)
	}
	return ty
}

// allTypesKV has a value of every metadata type, arrays of every element
// type (empty, nested, strings), so a round trip covers the whole encoding.
func allTypesKV() []KV {
	return []KV{
		{"general.architecture", "qwen3next"},
		{"u8", uint8(250)}, {"i8", int8(-7)}, {"u16", uint16(65000)}, {"i16", int16(-30000)},
		{"u32", uint32(4000000000)}, {"i32", int32(-2000000000)}, {"f32", float32(1.5e-6)},
		{"bool.t", true}, {"bool.f", false}, {"str", "héllo\x00world"}, {"str.empty", ""},
		{"u64", uint64(1) << 63}, {"i64", int64(math.MinInt64)}, {"f64", math.Pi},
		{"a.u8", Array{TypeUint8, []uint8{1, 2, 255}}},
		{"a.i8", Array{TypeInt8, []int8{-128, 127}}},
		{"a.u16", Array{TypeUint16, []uint16{1, 65535}}},
		{"a.i16", Array{TypeInt16, []int16{-1, 1}}},
		{"a.u32", Array{TypeUint32, []uint32{7}}},
		{"a.i32", Array{TypeInt32, []int32{-5, 0, 5}}},
		{"a.f32", Array{TypeFloat32, []float32{0.25, float32(math.Inf(-1))}}},
		{"a.bool", Array{TypeBool, []bool{true, false, true}}},
		{"a.str", Array{TypeString, []string{"a", "", "<0x80>"}}},
		{"a.u64", Array{TypeUint64, []uint64{math.MaxUint64}}},
		{"a.i64", Array{TypeInt64, []int64{-1}}},
		{"a.f64", Array{TypeFloat64, []float64{-0.5, 1e300}}},
		{"a.empty", Array{TypeInt32, []int32{}}},
		{"a.nested", Array{TypeArray, []Array{{TypeString, []string{"x"}}, {TypeUint8, []uint8{}}, {TypeArray, []Array{{TypeBool, []bool{true}}}}}}},
	}
}

func sampleTensors(t testing.TB) []Tensor {
	f32 := make([]byte, 4*3*5)
	for i := range f32 {
		f32[i] = byte(i)
	}
	q8 := make([]byte, 2*34) // 2 rows of 32
	for i := range q8 {
		q8[i] = byte(3 * i)
	}
	iq2 := make([]byte, 74*2) // [2, 256]
	for i := range iq2 {
		iq2[i] = byte(7 * i)
	}
	return []Tensor{
		{TensorInfo{Name: "token_embd.weight", Dims: []uint64{5, 3}, Type: ggmlType(t, 0)}, f32},
		{TensorInfo{Name: "blk.0.ffn_down_exps.weight", Dims: []uint64{32, 2}, Type: ggmlType(t, 8)}, q8},
		{TensorInfo{Name: "empty", Dims: []uint64{0}, Type: ggmlType(t, 1)}, nil},
		{TensorInfo{Name: "blk.0.ffn_gate_exps.weight", Dims: []uint64{256, 1, 2}, Type: ggmlType(t, 17)}, iq2},
		{TensorInfo{Name: "odd", Dims: []uint64{3}, Type: ggmlType(t, 1)}, []byte{1, 2, 3, 4, 5, 6}},
	}
}

func writeSample(t *testing.T, kv []KV) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := WriteFile(path, kv, sampleTensors(t)); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []uint32{0, 8, 64, 4096} {
		kv := allTypesKV()
		if align != 0 {
			kv = append(kv, KV{KeyAlignment, align})
		}
		path := writeSample(t, kv)
		f, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		if f.Version != 3 {
			t.Errorf("version %d", f.Version)
		}
		if !reflect.DeepEqual(f.KV, kv) {
			t.Errorf("alignment %d: metadata differs:\n got %#v\nwant %#v", align, f.KV, kv)
		}
		want := int64(align)
		if align == 0 {
			want = DefaultAlignment
		}
		if f.Alignment != want || f.DataOffset%want != 0 {
			t.Errorf("alignment %d, data at %d; want alignment %d", f.Alignment, f.DataOffset, want)
		}
		for _, st := range sampleTensors(t) {
			got, ok := f.Tensor(st.Name)
			if !ok {
				t.Fatalf("tensor %s missing", st.Name)
			}
			if got.Offset%want != 0 || !reflect.DeepEqual(got.Dims, st.Dims) || got.Type != st.Type || !bytes.Equal(got.Data, st.Data) {
				t.Errorf("tensor %s: %+v, data %d bytes; want dims %v type %s data %d bytes", st.Name, got.TensorInfo, len(got.Data), st.Dims, st.Type.Name, len(st.Data))
			}
		}
		if s, err := f.String("general.architecture"); err != nil || s != "qwen3next" {
			t.Errorf("String: %q, %v", s, err)
		}
		if u, err := f.Uint("u16"); err != nil || u != 65000 {
			t.Errorf("Uint(u16): %d, %v", u, err)
		}
		if _, err := f.Uint("i8"); err == nil || !strings.Contains(err.Error(), "i8") {
			t.Errorf("Uint of a negative int8: %v", err)
		}
		if _, err := f.Float("str"); err == nil || !strings.Contains(err.Error(), "key str is a string") {
			t.Errorf("Float of a string: %v", err)
		}
		if _, err := f.String("nope"); err == nil || !strings.Contains(err.Error(), "nope missing") {
			t.Errorf("missing key: %v", err)
		}
		if a, err := f.Array("a.str"); err != nil || a.Len() != 3 {
			t.Errorf("Array: %v, %v", a, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, ok := f.Tensor("odd"); ok {
			t.Error("Tensor after Close returned data")
		}
	}
}

// TestLayoutMatchesSpec checks the bytes against the format description
// (magic, version, counts, the first KV, alignment padding) independently of
// our reader.
func TestLayoutMatchesSpec(t *testing.T) {
	path := writeSample(t, []KV{{"k", uint32(7)}})
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	le := binary.LittleEndian
	if string(b[:4]) != "GGUF" || le.Uint32(b[4:]) != 3 || le.Uint64(b[8:]) != 5 || le.Uint64(b[16:]) != 1 {
		t.Fatalf("header % x", b[:24])
	}
	// key "k": u64 length 1, 'k', type u32 4 (uint32), value 7.
	if le.Uint64(b[24:]) != 1 || b[32] != 'k' || le.Uint32(b[33:]) != 4 || le.Uint32(b[37:]) != 7 {
		t.Fatalf("first KV % x", b[24:41])
	}
	// first tensor info: name, n_dims 2, ne {5, 3}, type 0, offset 0.
	o := 41
	n := int(le.Uint64(b[o:]))
	o += 8 + n
	if string(b[41+8:41+8+n]) != "token_embd.weight" || le.Uint32(b[o:]) != 2 || le.Uint64(b[o+4:]) != 5 || le.Uint64(b[o+12:]) != 3 || le.Uint32(b[o+20:]) != 0 || le.Uint64(b[o+24:]) != 0 {
		t.Fatalf("first tensor info % x", b[41:o+32])
	}
	// f32 tensor 60 bytes → padded to 64; the q8_0 tensor starts at 64.
	f, err := Parse(path, b)
	if err != nil {
		t.Fatal(err)
	}
	if q, _ := f.Tensor("blk.0.ffn_down_exps.weight"); q.Offset != 64 || q.Size != 68 {
		t.Errorf("q8_0 tensor at %d size %d, want 64, 68", q.Offset, q.Size)
	}
	if int64(len(b)) != f.DataOffset+alignUp(f.Tensors[len(f.Tensors)-1].Offset+6, 32) {
		t.Errorf("file is %d bytes; the last tensor should end padded", len(b))
	}
}

func TestStreamingWrite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.gguf")
	ts := sampleTensors(t)
	infos := make([]TensorInfo, len(ts))
	var all []byte
	for i, x := range ts {
		infos[i] = x.TensorInfo
		all = append(all, x.Data...)
	}
	w, err := Create(path, nil, infos)
	if err != nil {
		t.Fatal(err)
	}
	for len(all) > 0 { // 7-byte pieces straddle every tensor boundary
		n := min(7, len(all))
		if _, err := w.Write(all[:n]); err != nil {
			t.Fatal(err)
		}
		all = all[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, x := range ts {
		got, _ := f.Tensor(x.Name)
		if !bytes.Equal(got.Data, x.Data) {
			t.Errorf("tensor %s differs", x.Name)
		}
	}
}

// noFiles asserts the directory holds nothing: no target, no temporary.
func noFiles(t *testing.T, dir string) {
	t.Helper()
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		t.Errorf("left behind: %s", e.Name())
	}
}

func TestWriterErrors(t *testing.T) {
	ts := sampleTensors(t)
	infos := []TensorInfo{ts[0].TensorInfo, ts[1].TensorInfo}
	cases := []struct {
		name string
		kv   []KV
		ti   []TensorInfo
		want string
	}{
		{"dup key", []KV{{"a", uint8(1)}, {"a", uint8(2)}}, nil, "metadata key a given twice"},
		{"bad go type", []KV{{"a", 3}}, nil, "metadata key a: int is not a GGUF metadata type"},
		{"array mismatch", []KV{{"a", Array{TypeUint32, []int32{1}}}}, nil, "array of uint32 holds a []int32"},
		{"alignment type", []KV{{KeyAlignment, uint64(32)}}, nil, "general.alignment must be a uint32 power of two"},
		{"alignment value", []KV{{KeyAlignment, uint32(24)}}, nil, "general.alignment must be a uint32 power of two"},
		{"dup tensor", nil, []TensorInfo{infos[0], infos[0]}, "tensor token_embd.weight given twice"},
		{"long name", nil, []TensorInfo{{Name: strings.Repeat("x", 64), Dims: []uint64{1}, Type: ggmlType(t, 0)}}, "want 1 to 63 bytes"},
		{"row not blocks", nil, []TensorInfo{{Name: "q", Dims: []uint64{100, 2}, Type: ggmlType(t, 17)}}, "tensor q: dims [100 2]: row of 100 elements is not a multiple of the iq2_xs block size 256"},
		{"bad type", nil, []TensorInfo{{Name: "q", Dims: []uint64{1}, Type: quant.GGMLType{Code: 99, Name: "x", BlockElems: 1, BlockBytes: 1}}}, "tensor q: type"},
		{"no dims", nil, []TensorInfo{{Name: "q", Type: ggmlType(t, 0)}}, "tensor q: 0 dims"},
	}
	for _, c := range cases {
		dir := t.TempDir()
		_, err := Create(filepath.Join(dir, "x.gguf"), c.kv, c.ti)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "x.gguf") {
			t.Errorf("%s: err = %v, want it to contain %q and the path", c.name, err, c.want)
		}
		noFiles(t, dir)
	}

	// Data errors abandon the file.
	for _, c := range []struct {
		name string
		do   func(w *Writer) error
		want string
	}{
		{"order", func(w *Writer) error { return w.WriteTensor(infos[1].Name, ts[1].Data) }, "written out of order: the next is token_embd.weight"},
		{"size", func(w *Writer) error { return w.WriteTensor(infos[0].Name, ts[0].Data[:10]) }, "10 bytes of data, its dims [5 3] of f32 need 60"},
		{"incomplete", func(w *Writer) error { _, err := w.Write(ts[0].Data[:10]); return err }, "tensor token_embd.weight incomplete: 10 of 60 bytes written"},
		{"too much", func(w *Writer) error { _, err := w.Write(make([]byte, 60+68+1)); return err }, "1 bytes of data beyond the last tensor"},
	} {
		dir := t.TempDir()
		w, err := Create(filepath.Join(dir, "x.gguf"), nil, infos)
		if err != nil {
			t.Fatal(err)
		}
		err = c.do(w)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
		noFiles(t, dir)
	}
}

// rawFile assembles a GGUF image by hand, independently of the writer, so
// tests can corrupt any field.
type rawFile struct {
	b bytes.Buffer
}

func (r *rawFile) u32(v uint32) *rawFile {
	r.b.Write(binary.LittleEndian.AppendUint32(nil, v))
	return r
}
func (r *rawFile) u64(v uint64) *rawFile {
	r.b.Write(binary.LittleEndian.AppendUint64(nil, v))
	return r
}
func (r *rawFile) str(s string) *rawFile { r.u64(uint64(len(s))); r.b.WriteString(s); return r }
func (r *rawFile) pad(a int) *rawFile {
	for r.b.Len()%a != 0 {
		r.b.WriteByte(0)
	}
	return r
}

// tensorFile is a file with one KV and two f32 tensors of 4 values, with the
// given field values (so tests can corrupt one at a time).
func tensorFile(version uint32, type1 uint32, off1, off2 uint64, dataLen int) []byte {
	r := &rawFile{}
	r.u32(Magic).u32(version).u64(2).u64(1)
	r.str("general.architecture").u32(uint32(TypeString)).str("x")
	r.str("a").u32(1).u64(4).u32(type1).u64(off1)
	r.str("b").u32(1).u64(4).u32(0).u64(off2)
	r.pad(32)
	r.b.Write(make([]byte, dataLen))
	return r.b.Bytes()
}

func wantParseErr(t *testing.T, name string, b []byte, subs ...string) {
	t.Helper()
	_, err := Parse("bad.gguf", b)
	if err == nil {
		t.Errorf("%s: parsed without error", name)
		return
	}
	for _, s := range append(subs, "bad.gguf") {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: error %q does not contain %q", name, err, s)
		}
	}
}

func TestCorruptInputs(t *testing.T) {
	good := tensorFile(3, 0, 0, 32, 48)
	if _, err := Parse("good", good); err != nil {
		t.Fatalf("the hand-built file is rejected: %v", err)
	}
	v2 := tensorFile(2, 0, 0, 32, 48)
	if f, err := Parse("v2", v2); err != nil || f.Version != 2 {
		t.Errorf("version 2: %v", err)
	}

	bad := bytes.Clone(good)
	copy(bad, "GGML")
	wantParseErr(t, "magic", bad, "bad magic", "not a GGUF file")
	wantParseErr(t, "version 1", tensorFile(1, 0, 0, 32, 48), "version 1 is not supported")
	wantParseErr(t, "version 4", tensorFile(4, 0, 0, 32, 48), "unsupported GGUF version 4")
	wantParseErr(t, "big-endian", tensorFile(3<<24, 0, 0, 32, 48), "big-endian")
	wantParseErr(t, "unknown type", tensorFile(3, 4, 0, 32, 48), "tensor a: unknown ggml type 4")
	wantParseErr(t, "misaligned", tensorFile(3, 0, 0, 16, 48), "tensor b: offset 16 is not a multiple of the alignment 32")
	wantParseErr(t, "overlap", tensorFile(3, 0, 0, 0, 48), "overlap")
	wantParseErr(t, "out of range", tensorFile(3, 0, 0, 64, 48), "tensor b needs bytes [64, 80) of the data section, which has 48")
	wantParseErr(t, "truncated data", good[:len(good)-1], "file truncated", "tensor b needs bytes [32, 48)")
	wantParseErr(t, "empty", nil, "header", "truncated")
	wantParseErr(t, "empty", []byte("GGUF\x03\x00\x00\x00"), "header", "truncated")

	// Every prefix of a valid file must fail cleanly, never panic.
	for n := 0; n < len(good); n++ {
		if _, err := Parse("cut", good[:n]); err == nil {
			t.Fatalf("prefix of %d bytes parsed", n)
		} else if !errors.Is(err, errTruncated) && n > 24 {
			t.Errorf("prefix of %d bytes: %v, want a truncation error", n, err)
		}
	}

	kvFile := func(key string, typ uint32, val func(r *rawFile)) []byte {
		r := &rawFile{}
		r.u32(Magic).u32(3).u64(0).u64(1).str(key).u32(typ)
		val(r)
		return r.b.Bytes()
	}
	wantParseErr(t, "value type", kvFile("k", 13, func(r *rawFile) { r.u32(0) }), "metadata key k: unknown value type 13")
	wantParseErr(t, "bool", kvFile("k", uint32(TypeBool), func(r *rawFile) { r.b.WriteByte(2) }), "metadata key k: bool value 2")
	wantParseErr(t, "array count", kvFile("k", uint32(TypeArray), func(r *rawFile) { r.u32(uint32(TypeUint64)).u64(1 << 60) }), "metadata key k", "array of 1152921504606846976 uint64")
	wantParseErr(t, "string length", kvFile("k", uint32(TypeString), func(r *rawFile) { r.u64(1 << 62) }), "metadata key k", "truncated")
	wantParseErr(t, "alignment", kvFile(KeyAlignment, uint32(TypeUint32), func(r *rawFile) { r.u32(48) }), "general.alignment = 48: not a power of two")
	wantParseErr(t, "alignment type", kvFile(KeyAlignment, uint32(TypeUint64), func(r *rawFile) { r.u64(32) }), "general.alignment is a uint64, want uint32")
	deep := kvFile("k", uint32(TypeArray), func(r *rawFile) {
		for i := 0; i < 10; i++ {
			r.u32(uint32(TypeArray)).u64(1)
		}
		r.u32(uint32(TypeUint8)).u64(0)
	})
	wantParseErr(t, "nesting", deep, "nested more than 8 deep")
	dupKey := &rawFile{}
	dupKey.u32(Magic).u32(3).u64(0).u64(2).str("k").u32(0).b.WriteByte(1)
	dupKey.str("k").u32(0).b.WriteByte(2)
	wantParseErr(t, "duplicate key", dupKey.b.Bytes(), "metadata key k appears twice")
	huge := &rawFile{}
	huge.u32(Magic).u32(3).u64(1 << 40).u64(0)
	wantParseErr(t, "tensor count", huge.b.Bytes(), "header claims 1099511627776 tensors")

	// Tensor infos: too many dims, name too long, ne0 not a block multiple, size overflow.
	info := func(name string, dims []uint64, typ uint32) []byte {
		r := &rawFile{}
		r.u32(Magic).u32(3).u64(1).u64(0).str(name).u32(uint32(len(dims)))
		for _, d := range dims {
			r.u64(d)
		}
		r.u32(typ).u64(0).pad(32)
		r.b.Write(make([]byte, 64))
		return r.b.Bytes()
	}
	wantParseErr(t, "dims", info("t", []uint64{1, 1, 1, 1, 1}, 0), "tensor t: 5 dims")
	wantParseErr(t, "name", info(strings.Repeat("n", 64), []uint64{1}, 0), "longer than ggml's 63")
	wantParseErr(t, "block", info("t", []uint64{100}, 17), "tensor t: dims [100]: row of 100 elements is not a multiple of the iq2_xs block size 256")
	wantParseErr(t, "overflow", info("t", []uint64{1 << 40, 1 << 40}, 0), "tensor t: dims [1099511627776 1099511627776] of f32: size overflows int64")
	wantParseErr(t, "big dim", info("t", []uint64{1 << 63}, 0), "overflows int64")
	wantParseErr(t, "big row", info("t", []uint64{1 << 62}, 0), "row of 4611686018427387904 f32 elements overflows int64 bytes")
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Errorf("missing file: %v", err)
	}
	p := filepath.Join(dir, "empty.gguf")
	os.WriteFile(p, nil, 0o644)
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "empty.gguf") {
		t.Errorf("empty file: %v", err)
	}
	p = filepath.Join(dir, "cut.gguf")
	good := tensorFile(3, 0, 0, 32, 48)
	os.WriteFile(p, good[:len(good)-5], 0o644)
	if _, err := Open(p); err == nil || !strings.Contains(err.Error(), "cut.gguf: file truncated: tensor b") {
		t.Errorf("truncated file: %v", err)
	}
}
