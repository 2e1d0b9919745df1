package quant

import (
	"encoding/binary"
	"math"
	"os"
	"slices"
	"testing"
)

// ggmlCase is one testdata/ggml_<format>.bin (see testdata/README.md):
// inputs, the blocks ggml's reference quantizer made of them and ggml's
// decode of those blocks; then random blocks and ggml's decode of them.
type ggmlCase struct {
	x, y   []float32
	qw     []float32 // the importance matrix ggml quantized with (nil: none)
	blocks []byte
	rnd    []byte
	rndY   []float32
	f      *Format
}

func readGGMLCase(t testing.TB, name string) ggmlCase {
	t.Helper()
	raw, err := os.ReadFile("testdata/ggml_" + name + ".bin")
	if err != nil {
		t.Fatal(err)
	}
	f, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	floats := func(n int) []float32 {
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		raw = raw[4*n:]
		return out
	}
	bytesOf := func(n int) []byte {
		out := raw[:n]
		raw = raw[n:]
		return out
	}
	var c ggmlCase
	c.f = f
	n := int(binary.LittleEndian.Uint32(raw))
	raw = raw[4:]
	c.x = floats(n)
	cols := int(binary.LittleEndian.Uint32(raw))
	raw = raw[4:]
	if cols > 0 {
		c.qw = floats(cols)
	}
	c.blocks = bytesOf(f.Bytes(n))
	c.y = floats(n)
	m := int(binary.LittleEndian.Uint32(raw))
	raw = raw[4:]
	c.rnd = bytesOf(f.Bytes(m))
	c.rndY = floats(m)
	if len(raw) != 0 {
		t.Fatalf("testdata/ggml_%s.bin: %d trailing bytes", name, len(raw))
	}
	return c
}

// ggmlFormats are the formats with llama.cpp-written test blocks: every
// quantized format strata has. ggml quantized the IQ formats llama-quantize
// refuses without one (iq2_xxs, iq2_xs, iq1_s, iq1_m) with an importance
// matrix, which the file carries.
var ggmlFormats = []string{"q4_0", "q4_1", "q5_0", "q5_1", "q2_k", "q3_k", "q5_k", "q8_0", "q4_k", "q6_k",
	"iq2_xxs", "iq2_xs", "iq3_xxs", "iq2_s", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs"}

// ownQuantizers are the formats whose quantizers deliberately differ from
// ggml's (docs/decisions.md: q8_0 rounds against the stored f16 scale; q4_k,
// q6_k, iq2_xs and the iq4s search their scales their own way), so only
// their decoders are compared; their bytes may differ in a level or scale.
var ownQuantizers = map[string]bool{"q8_0": true, "q4_k": true, "q6_k": true, "iq2_xs": true, "iq4_nl": true, "iq4_xs": true}

// TestGGMLCasesComplete: every quantized format strata registers has
// ggml-written test blocks.
func TestGGMLCasesComplete(t *testing.T) {
	for _, name := range Names() {
		if f := registry[name]; f.BlockElems > 1 && !slices.Contains(ggmlFormats, name) {
			t.Errorf("format %s has no ggml-written test blocks (testdata/ggml_%s.bin)", name, name)
		}
	}
}

// Our decoders equal ggml's dequantize_row_* bit for bit, on the blocks
// ggml's quantizer wrote and on random blocks; our quantizers write ggml's
// blocks byte for byte; Dot equals a float64 dot of ggml's decode.
func TestGGMLWrittenBlocks(t *testing.T) {
	for _, name := range ggmlFormats {
		t.Run(name, func(t *testing.T) {
			c := readGGMLCase(t, name)
			for _, part := range []struct {
				what   string
				blocks []byte
				want   []float32
			}{{"quantized", c.blocks, c.y}, {"random", c.rnd, c.rndY}} {
				got := make([]float32, len(part.want))
				c.f.Decode(part.blocks, got)
				bad := 0
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(part.want[i]) {
						if bad < 5 {
							t.Errorf("%s blocks: element %d decodes to %g, ggml %g", part.what, i, got[i], part.want[i])
						}
						bad++
					}
				}
				if bad > 0 {
					t.Errorf("%s blocks: %d of %d elements differ from ggml", part.what, bad, len(got))
				}
				x := make([]float32, len(part.want))
				for i := range x {
					x[i] = float32(math.Sin(float64(i)*0.7)) + 0.25
				}
				var want float64
				for i, v := range part.want {
					want += float64(v) * float64(x[i])
				}
				var mag float64
				for i, v := range part.want {
					mag += math.Abs(float64(v) * float64(x[i]))
				}
				if got := c.f.Dot(part.blocks, x); math.Abs(got-want) > 2e-7*mag+1e-30 { // the decoder's float32 rounding of each value
					t.Errorf("%s blocks: Dot %v, ggml decode · x %v", part.what, got, want)
				}
				if got := c.f.Dot32(part.blocks, x); math.Abs(float64(got)-want) > 1e-5*mag+1e-30 {
					t.Errorf("%s blocks: Dot32 %v, ggml decode · x %v (Σ|w·x| %v)", part.what, got, want, mag)
				}
			}
			if c.f.Encode == nil || ownQuantizers[name] || c.qw != nil {
				return // decode-only, or not ggml's quantizer, or ggml's imatrix path
			}
			enc := make([]byte, len(c.blocks))
			c.f.Encode(c.x, enc)
			for b := 0; b < len(enc)/c.f.BlockBytes; b++ {
				lo, hi := b*c.f.BlockBytes, (b+1)*c.f.BlockBytes
				for i := lo; i < hi; i++ {
					if enc[i] != c.blocks[i] {
						t.Errorf("block %d: our quantizer's byte %d is %#02x, ggml's %#02x", b, i-lo, enc[i], c.blocks[i])
						break
					}
				}
			}
		})
	}
}
