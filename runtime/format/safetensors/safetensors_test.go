package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models/quant"
)

func f32Bytes(vs ...float32) []byte {
	b := make([]byte, 4*len(vs))
	for i, v := range vs {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return b
}

func sampleTensors() []Tensor {
	bf := make([]byte, 2*3)
	for i, v := range []float32{1, -2.5, 0.15625} {
		binary.LittleEndian.PutUint16(bf[2*i:], quant.BF16(v))
	}
	f16 := make([]byte, 2*2)
	for i, v := range []float32{0.5, -65504} {
		binary.LittleEndian.PutUint16(f16[2*i:], quant.F16(v))
	}
	f64 := make([]byte, 8*2)
	binary.LittleEndian.PutUint64(f64, math.Float64bits(3.25))
	binary.LittleEndian.PutUint64(f64[8:], math.Float64bits(-1e-3))
	i64 := make([]byte, 8*2)
	binary.LittleEndian.PutUint64(i64, uint64(7))
	binary.LittleEndian.PutUint64(i64[8:], uint64(math.MaxUint64)) // -1
	i32 := make([]byte, 4*3)
	for i, v := range []int32{1, -2, math.MaxInt32} {
		binary.LittleEndian.PutUint32(i32[4*i:], uint32(v))
	}
	return []Tensor{
		{Name: "w.f32", DType: "F32", Shape: []int{2, 3}, Data: f32Bytes(1, 2, 3, 4, 5, 6)},
		{Name: "w.bf16", DType: "BF16", Shape: []int{3}, Data: bf},
		{Name: "w.f16", DType: "F16", Shape: []int{1, 2}, Data: f16},
		{Name: "w.f64", DType: "F64", Shape: []int{2}, Data: f64},
		{Name: "ids.i64", DType: "I64", Shape: []int{2}, Data: i64},
		{Name: "ids.i32", DType: "I32", Shape: []int{3}, Data: i32},
		{Name: "mask", DType: "BOOL", Shape: []int{5}, Data: []byte{1, 0, 1, 1, 0}},
		{Name: "scalar", DType: "F32", Shape: []int{}, Data: f32Bytes(42)},
		{Name: "empty", DType: "F32", Shape: []int{0, 4}, Data: []byte{}},
	}
}

func writeSample(t *testing.T) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "x.safetensors")
	if err := WriteFile(p, sampleTensors(), map[string]string{"format": "pt", "note": "<&>"}); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRoundTrip(t *testing.T) {
	p := writeSample(t)
	f, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()

	want := sampleTensors()
	var names []string
	for _, w := range want {
		names = append(names, w.Name)
		got, ok := f.Tensor(w.Name)
		if !ok {
			t.Fatalf("tensor %s missing", w.Name)
		}
		if got.DType != w.DType || !reflect.DeepEqual(got.Shape, w.Shape) || string(got.Data) != string(w.Data) {
			t.Errorf("%s: got %s %v %x, want %s %v %x", w.Name, got.DType, got.Shape, got.Data, w.DType, w.Shape, w.Data)
		}
	}
	sortedNames := append([]string(nil), names...)
	sort.Strings(sortedNames)
	if !reflect.DeepEqual(f.Names(), sortedNames) {
		t.Errorf("Names() = %v, want %v", f.Names(), sortedNames)
	}
	if md := f.Metadata(); md["format"] != "pt" || md["note"] != "<&>" {
		t.Errorf("metadata = %v", md)
	}

	// Decoders.
	check := func(name string, want []float32) {
		t.Helper()
		tt, _ := f.Tensor(name)
		got, err := tt.Float32s()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s Float32s = %v, want %v", name, got, want)
		}
	}
	check("w.f32", []float32{1, 2, 3, 4, 5, 6})
	check("w.bf16", []float32{1, -2.5, 0.15625})
	check("w.f16", []float32{0.5, -65504})
	check("w.f64", []float32{3.25, float32(-1e-3)})
	ids, _ := f.Tensor("ids.i64")
	if got, err := ids.Int32s(); err != nil || !reflect.DeepEqual(got, []int32{7, -1}) {
		t.Errorf("i64 Int32s = %v, %v", got, err)
	}
	ids32, _ := f.Tensor("ids.i32")
	if got, err := ids32.Int32s(); err != nil || !reflect.DeepEqual(got, []int32{1, -2, math.MaxInt32}) {
		t.Errorf("i32 Int32s = %v, %v", got, err)
	}
	mask, _ := f.Tensor("mask")
	if _, err := mask.Float32s(); err == nil {
		t.Error("Float32s of BOOL should fail")
	}

	// Layout: header padded to 8, data packed in the given order.
	raw, _ := os.ReadFile(p)
	hlen := binary.LittleEndian.Uint64(raw)
	if hlen%8 != 0 {
		t.Errorf("header length %d not a multiple of 8", hlen)
	}
	var firstData []byte
	for _, w := range want {
		firstData = append(firstData, w.Data...)
	}
	if string(raw[8+hlen:]) != string(firstData) {
		t.Error("data section is not the tensors packed in order")
	}
	if st, _ := os.Stat(p); st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", st.Mode().Perm())
	}
}

func TestWriteDeterministicAndAtomic(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.safetensors"), filepath.Join(dir, "b.safetensors")
	if err := WriteFile(a, sampleTensors(), nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(b, sampleTensors(), nil); err != nil {
		t.Fatal(err)
	}
	ra, _ := os.ReadFile(a)
	rb, _ := os.ReadFile(b)
	if string(ra) != string(rb) {
		t.Error("two writes of the same tensors differ")
	}
	// A bad tensor fails before anything lands on disk, and leaves no temp file.
	bad := []Tensor{{Name: "x", DType: "F32", Shape: []int{3}, Data: f32Bytes(1, 2)}}
	if err := WriteFile(filepath.Join(dir, "c.safetensors"), bad, nil); err == nil {
		t.Error("WriteFile accepted data of the wrong size")
	}
	dup := []Tensor{{Name: "x", DType: "F32", Shape: []int{1}, Data: f32Bytes(1)}, {Name: "x", DType: "F32", Shape: []int{1}, Data: f32Bytes(1)}}
	if err := WriteFile(filepath.Join(dir, "d.safetensors"), dup, nil); err == nil {
		t.Error("WriteFile accepted a duplicate name")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		var ns []string
		for _, e := range entries {
			ns = append(ns, e.Name())
		}
		t.Errorf("directory holds %v, want only a and b", ns)
	}
}

func wantErr(t *testing.T, err error, subs ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", subs)
	}
	for _, s := range subs {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
}

func TestTruncated(t *testing.T) {
	p := writeSample(t)
	raw, _ := os.ReadFile(p)
	// Cut into the last tensor ("empty" is zero-sized, so "scalar" is the last with bytes).
	cut := filepath.Join(t.TempDir(), "cut.safetensors")
	os.WriteFile(cut, raw[:len(raw)-2], 0o644)
	_, err := Open(cut)
	wantErr(t, err, "truncated", "scalar", cut)
}

func rawFile(t *testing.T, header string, data []byte) string {
	t.Helper()
	b := make([]byte, 8)
	binary.LittleEndian.PutUint64(b, uint64(len(header)))
	b = append(b, header...)
	b = append(b, data...)
	p := filepath.Join(t.TempDir(), "raw.safetensors")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestHeaderErrors(t *testing.T) {
	// Header length larger than the file.
	p := filepath.Join(t.TempDir(), "big.safetensors")
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, 1000)
	os.WriteFile(p, b, 0o644)
	_, err := Open(p)
	wantErr(t, err, "truncated or not a safetensors file", p)

	// Absurd header length.
	binary.LittleEndian.PutUint64(b, 1<<40)
	os.WriteFile(p, b, 0o644)
	_, err = Open(p)
	wantErr(t, err, "not a safetensors file")

	// Shorter than the length prefix.
	os.WriteFile(p, b[:5], 0o644)
	_, err = Open(p)
	wantErr(t, err, "truncated")

	// Empty file.
	os.WriteFile(p, nil, 0o644)
	_, err = Open(p)
	wantErr(t, err, "truncated")

	_, err = Open(rawFile(t, `{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]`, f32Bytes(1)))
	wantErr(t, err, "bad JSON")

	_, err = Open(rawFile(t, `not json at all`, nil))
	wantErr(t, err, "bad JSON")

	_, err = Open(rawFile(t, `{"a": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}}`, make([]byte, 24)))
	wantErr(t, err, "tensor a", "needs 24 bytes")

	_, err = Open(rawFile(t, `{"a": {"dtype": "Q9", "shape": [1], "data_offsets": [0, 4]}}`, make([]byte, 4)))
	wantErr(t, err, "tensor a", "unknown dtype")

	_, err = Open(rawFile(t, `{"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}`, make([]byte, 4)))
	wantErr(t, err, "tensor a", "data_offsets")

	_, err = Open(rawFile(t, `{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}`, make([]byte, 4)))
	wantErr(t, err, "tensor a", "data_offsets")

	_, err = Open(rawFile(t, `{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}`, make([]byte, 4)))
	wantErr(t, err, "tensor a", "negative")

	_, err = Open(rawFile(t, `{"a": {"dtype": "F32", "shape": [4611686018427387904, 4], "data_offsets": [0, 4]}}`, make([]byte, 4)))
	wantErr(t, err, "tensor a")

	_, err = Open(rawFile(t, `{"__metadata__": {"x": 1}}`, nil))
	wantErr(t, err, "__metadata__")
}

func TestInt32sRange(t *testing.T) {
	d := make([]byte, 8)
	binary.LittleEndian.PutUint64(d, 1<<40)
	_, err := Tensor{Name: "big", DType: "I64", Shape: []int{1}, Data: d}.Int32s()
	wantErr(t, err, "big", "int32")
}

// Float32s of BF16 must be exact: every bf16 value is a float32.
func TestBF16Exact(t *testing.T) {
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.5, 3.140625, math.Float32frombits(0x80800000), 65280, math.Float32frombits(0x71490000), math.Float32frombits(0x00010000), float32(math.Inf(1)), float32(math.Inf(-1))}
	d := make([]byte, 2*len(vals))
	for i, v := range vals {
		if quant.BF16(v) != uint16(math.Float32bits(v)>>16) || math.Float32bits(v)&0xffff != 0 {
			t.Fatalf("test value %g is not exactly representable in bf16", v)
		}
		binary.LittleEndian.PutUint16(d[2*i:], quant.BF16(v))
	}
	got, err := Tensor{Name: "x", DType: "BF16", Shape: []int{len(vals)}, Data: d}.Float32s()
	if err != nil {
		t.Fatal(err)
	}
	for i := range vals {
		if math.Float32bits(got[i]) != math.Float32bits(vals[i]) {
			t.Errorf("element %d: got %g (%08x), want %g (%08x)", i, got[i], math.Float32bits(got[i]), vals[i], math.Float32bits(vals[i]))
		}
	}
}

func writeIndex(t *testing.T, dir string, weightMap map[string]string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"total_size": 0}, "weight_map": weightMap})
	if err := os.WriteFile(filepath.Join(dir, IndexFileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestShardedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	s1 := "model-00001-of-00002.safetensors"
	s2 := "model-00002-of-00002.safetensors"
	if err := WriteFile(filepath.Join(dir, s1), []Tensor{
		{Name: "a", DType: "F32", Shape: []int{2}, Data: f32Bytes(1, 2)},
		{Name: "b", DType: "F32", Shape: []int{1}, Data: f32Bytes(3)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, s2), []Tensor{
		{Name: "c", DType: "F32", Shape: []int{1, 1}, Data: f32Bytes(4)},
	}, nil); err != nil {
		t.Fatal(err)
	}
	writeIndex(t, dir, map[string]string{"a": s1, "b": s1, "c": s2})
	ck, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := ck.Names(); !reflect.DeepEqual(got, []string{"a", "b", "c"}) {
		t.Errorf("Names = %v", got)
	}
	c, ok := ck.Tensor("c")
	if !ok {
		t.Fatal("tensor c missing")
	}
	if v, _ := c.Float32s(); !reflect.DeepEqual(v, []float32{4}) {
		t.Errorf("c = %v", v)
	}
	if got := ck.FileOf("c"); got != filepath.Join(dir, s2) {
		t.Errorf("FileOf(c) = %q", got)
	}
	if _, ok := ck.Tensor("zzz"); ok || ck.FileOf("zzz") != "" {
		t.Error("unknown tensor found")
	}
	if err := ck.Close(); err != nil {
		t.Fatal(err)
	}

	// A tensor listed in the index but absent from its shard.
	writeIndex(t, dir, map[string]string{"a": s1, "b": s1, "c": s2, "d": s2})
	_, err = OpenDir(dir)
	wantErr(t, err, "d (in "+s2+")", "absent")

	// A missing shard file.
	writeIndex(t, dir, map[string]string{"a": s1, "x": "model-00003-of-00003.safetensors"})
	_, err = OpenDir(dir)
	wantErr(t, err, "model-00003-of-00003.safetensors", "missing")

	// A shard path that escapes the directory.
	writeIndex(t, dir, map[string]string{"a": "../" + s1})
	_, err = OpenDir(dir)
	wantErr(t, err, "outside")
}

func TestOpenDirEmpty(t *testing.T) {
	dir := t.TempDir()
	_, err := OpenDir(dir)
	wantErr(t, err, dir, SingleFileName, IndexFileName)
}

func TestOracles(t *testing.T) {
	ck, err := OpenDir("../../../testdata/oracles/tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	qkvz, ok := ck.Tensor("model.layers.0.linear_attn.in_proj_qkvz.weight")
	if !ok {
		t.Fatal("in_proj_qkvz missing")
	}
	if qkvz.DType != "F32" || !reflect.DeepEqual(qkvz.Shape, []int{192, 64}) {
		t.Errorf("in_proj_qkvz is %s %v, want F32 [192 64]", qkvz.DType, qkvz.Shape)
	}
	if v, err := qkvz.Float32s(); err != nil || len(v) != 192*64 {
		t.Errorf("Float32s: %d values, %v", len(v), err)
	}
	if ck.Metadata()["format"] != "pt" {
		t.Errorf("metadata = %v", ck.Metadata())
	}

	f, err := Open("../../../testdata/oracles/tiny-k512/model.safetensors")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head, ok := f.Tensor("lm_head.weight")
	if !ok {
		t.Fatal("lm_head missing")
	}
	if head.DType != "BF16" || !reflect.DeepEqual(head.Shape, []int{1024, 64}) {
		t.Errorf("lm_head is %s %v, want BF16 [1024 64]", head.DType, head.Shape)
	}
	conv, _ := f.Tensor("model.layers.0.linear_attn.conv1d.weight")
	if !reflect.DeepEqual(conv.Shape, []int{128, 1, 4}) {
		t.Errorf("conv1d shape %v", conv.Shape)
	}
}
