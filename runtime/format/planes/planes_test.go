package planes

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
)

// safetensorsFile builds a small safetensors file of the given tensors
// (name → dtype, data), in order.
func safetensorsFile(t *testing.T, tensors [][3]any) []byte {
	t.Helper()
	header := map[string]any{"__metadata__": map[string]string{"format": "pt"}}
	var data []byte
	for _, tn := range tensors {
		b := tn[2].([]byte)
		header[tn[0].(string)] = map[string]any{"dtype": tn[1], "shape": []int{len(b)}, "data_offsets": []int{len(data), len(data) + len(b)}}
		data = append(data, b...)
	}
	js, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	out := binary.LittleEndian.AppendUint64(nil, uint64(len(js)))
	return append(append(out, js...), data...)
}

func words16(v ...uint16) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint16(b, x)
	}
	return b
}

// Every bf16 pattern, ±0, infinities and NaNs among them, survives a
// delta against every other pattern: ord is a bijection.
func TestDeltaEveryPattern(t *testing.T) {
	var cur, base []uint16
	for v := range 1 << 16 {
		cur = append(cur, uint16(v))
		base = append(base, uint16(v*7919+13))
	}
	a := safetensorsFile(t, [][3]any{{"w", "BF16", words16(base...)}})
	b := safetensorsFile(t, [][3]any{{"w", "BF16", words16(cur...)}})
	enc, err := Encode(b, EncodeOptions{Base: a, BaseName: "base.safetensors"})
	if err != nil {
		t.Fatal(err)
	}
	h, _, err := ParseHeader(enc)
	if err != nil {
		t.Fatal(err)
	}
	if h.Spans[1].Transform != Delta {
		t.Fatalf("the tensor's span is %+v, want a delta", h.Spans[1])
	}
	got, err := Decode(enc, func(string) ([]byte, error) { return a, nil })
	if err != nil || !bytes.Equal(got, b) {
		t.Fatalf("decode: %v", err)
	}
	for u := range 1 << 16 {
		if unord(ord(uint16(u))) != uint16(u) || unzigzag(zigzag(uint16(u))) != uint16(u) {
			t.Fatalf("%#04x does not survive ord or zigzag", u)
		}
	}
}

// Mixed dtypes, gaps and odd lengths round-trip; floats are planed with
// the sign rotated down, integers planed as they are.
func TestRoundTripMixed(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	f32 := make([]byte, 4*5000)
	for i := 0; i < len(f32); i += 4 {
		binary.LittleEndian.PutUint32(f32[i:], math.Float32bits(float32(r.NormFloat64()*0.02)))
	}
	f64 := binary.LittleEndian.AppendUint64(nil, math.Float64bits(-math.Pi))
	i32 := binary.LittleEndian.AppendUint32(nil, 42)
	file := safetensorsFile(t, [][3]any{{"a", "F32", f32}, {"b", "F64", f64}, {"c", "I32", i32}, {"d", "U8", []byte{1, 2, 3}}})
	enc, err := Encode(file, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(enc) >= len(file) {
		t.Errorf("encoded %d bytes, the file is %d", len(enc), len(file))
	}
	h, _, _ := ParseHeader(enc)
	var widths []int
	for _, s := range h.Spans {
		widths = append(widths, s.Width)
	}
	if want := []int{1, 4, 8, 4, 1}; !slicesEqual(widths, want) {
		t.Errorf("span widths %v, want %v", widths, want)
	}
	// Not safetensors: one span of bytes.
	for _, raw := range [][]byte{nil, []byte("hello"), bytes.Repeat([]byte("x"), 1000)} {
		enc, err := Encode(raw, EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := Decode(enc, nil); err != nil || !bytes.Equal(got, raw) {
			t.Errorf("%q: %q, %v", raw, got, err)
		}
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Damage is an error naming what is wrong, never a panic or wrong bytes.
func TestDamageIsAnError(t *testing.T) {
	file := safetensorsFile(t, [][3]any{{"w", "BF16", words16(1, 2, 3, 4, 5, 6, 7, 8)}})
	enc, err := Encode(file, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		data []byte
		want string
	}{
		"magic":     {append([]byte("XTRATAPL"), enc[8:]...), "magic"},
		"truncated": {enc[:len(enc)-1], "truncated"},
		"trailing":  {append(bytes.Clone(enc), 0), "after the last plane"},
		"flipped":   {flipLast(enc), "hash"},
	} {
		_, err := Decode(c.data, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error about %q", name, err, c.want)
		}
	}
	// A delta without its base.
	base := safetensorsFile(t, [][3]any{{"w", "BF16", words16(8, 7, 6, 5, 4, 3, 2, 1)}})
	enc, err = Encode(file, EncodeOptions{Base: base, BaseName: "b"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(enc, nil); err == nil || !strings.Contains(err.Error(), "no base") {
		t.Errorf("no base: %v", err)
	}
	if _, err := Decode(enc, func(string) ([]byte, error) { return base[:10], nil }); err == nil {
		t.Errorf("a short base decoded")
	}
}

func flipLast(b []byte) []byte {
	c := bytes.Clone(b)
	c[len(c)-1] ^= 1
	return c
}

// BenchmarkDecodeTinyGo: what start-up pays to decode the default model
// (go test -bench DecodeTinyGo ./runtime/format/planes).
func BenchmarkDecodeTinyGo(b *testing.B) {
	enc, err := os.ReadFile("../../../models/tiny-go/model.safetensors.planes")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(23973656)
	for b.Loop() {
		if _, err := Decode(enc, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// The cache decodes once, then serves its copy; a damaged copy is decoded
// again.
func TestCache(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(CacheEnv, dir)
	file := safetensorsFile(t, [][3]any{{"w", "BF16", words16(1, 2, 3, 4)}})
	src := t.TempDir()
	enc, err := Encode(file, EncodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(src+"/m.safetensors"+Ext, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := CachedOSFile(src + "/m.safetensors")
	if err != nil || p == "" || !strings.HasPrefix(p, dir) {
		t.Fatalf("cached at %q, %v; want a file in %s", p, err, dir)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, file) {
		t.Fatal("the cached copy differs from the file")
	}
	os.WriteFile(p, []byte("damaged"), 0o644)
	if p2, err := CachedOSFile(src + "/m.safetensors"); err != nil || p2 != p {
		t.Fatalf("%q, %v", p2, err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, file) {
		t.Fatal("a damaged copy was served")
	}
	t.Setenv(CacheEnv, "off")
	if p, err := CachedOSFile(src + "/m.safetensors"); p != "" || err != nil {
		t.Fatalf("cache off: %q, %v", p, err)
	}
}
