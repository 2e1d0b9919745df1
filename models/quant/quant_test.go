package quant

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func mustFormat(t testing.TB, name string) *Format {
	t.Helper()
	f, err := Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func put16(b []byte, off int, v uint16) { binary.LittleEndian.PutUint16(b[off:], v) }

// checkDecode decodes blk and compares with want element by element. The
// wanted values are exact in float32, so any difference is a bug.
func checkDecode(t *testing.T, name string, blk []byte, want []float32) {
	t.Helper()
	f := mustFormat(t, name)
	if len(blk) != f.BlockBytes || len(want) != f.BlockElems {
		t.Fatalf("%s: test block of %d bytes/%d values, format has %d/%d", name, len(blk), len(want), f.BlockBytes, f.BlockElems)
	}
	got := make([]float32, len(want))
	f.Decode(blk, got)
	bad := 0
	for i := range want {
		if got[i] != want[i] {
			if bad++; bad <= 8 {
				t.Errorf("%s: y[%d] = %v, want %v", name, i, got[i], want[i])
			}
		}
	}
	// Dot against unit vectors must pick out the same values.
	x := make([]float32, len(want))
	for _, i := range []int{0, 1, len(want)/2 + 3, len(want) - 1} {
		x[i] = 1
		if d := f.Dot(blk, x); d != float64(want[i]) {
			t.Errorf("%s: Dot with e_%d = %v, want %v", name, i, d, want[i])
		}
		x[i] = 0
	}
}

// The expected values below are worked out by hand from the formulas in
// ../shared/specs/ggml_formats.md §9, not produced by our decoders.

func TestDecodeFloatFormats(t *testing.T) {
	f16 := mustFormat(t, "f16")
	b := []byte{0x00, 0x3c, 0x00, 0xc0, 0xff, 0x7b, 0x01, 0x00} // 1, −2, 65504, 2^−24
	got := make([]float32, 4)
	f16.Decode(b, got)
	if want := []float32{1, -2, 65504, 0x1p-24}; !equal32(got, want) {
		t.Errorf("f16 decode %v, want %v", got, want)
	}
	bf := mustFormat(t, "bf16")
	b = []byte{0x80, 0x3f, 0xa0, 0xc0} // 1, −5
	bf.Decode(b, got[:2])
	if want := []float32{1, -5}; !equal32(got[:2], want) {
		t.Errorf("bf16 decode %v, want %v", got[:2], want)
	}
}

func equal32(a, b []float32) bool {
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

func TestDecodeQ8_0(t *testing.T) {
	blk := make([]byte, 34)
	put16(blk, 0, 0x3800) // d = 0.5
	blk[2], blk[3], blk[4], blk[5] = 1, 0xfe, 127, 0x80
	want := make([]float32, 32)
	want[0], want[1], want[2], want[3] = 0.5, -1, 63.5, -64 // 0.5·{1, −2, 127, −128}
	checkDecode(t, "q8_0", blk, want)
}

func TestDecodeQ4K(t *testing.T) {
	blk := make([]byte, 144)
	put16(blk, 0, 0x3c00) // d = 1
	put16(blk, 2, 0x3800) // dmin = 0.5
	copy(blk[4:], []byte{0x41, 0x02, 0x03, 0x04, 0x85, 0x06, 0x07, 0x08, 0x9a, 0x0b, 0x0c, 0xf1})
	// (sc, m) by get_scale_min_k4:
	//   j<4: sc = s[j]&63, m = s[j+4]&63 → (1,5) (2,6) (3,7) (4,8)
	//   j=4: sc = (0x9a&15)|(0x41>>6)<<4 = 10|16 = 26, m = (0x9a>>4)|(0x85>>6)<<4 = 9|32 = 41
	//   j=5: sc = 0x0b&15 | (0x02>>6)<<4 = 11, m = 0
	//   j=6: sc = 12, m = 0
	//   j=7: sc = 0xf1&15 = 1, m = 0xf1>>4 = 15
	m := []float32{5, 6, 7, 8, 41, 0, 0, 15}
	want := make([]float32, 256)
	for i := range want {
		want[i] = -0.5 * m[i/32] // q = 0: −dmin·m
	}
	blk[16+0] = 0x5a     // chunk 0, l=0: y[0] = 1·1·10 − 0.5·5; y[32] = 1·2·5 − 0.5·6
	blk[16+64+3] = 0x0f  // chunk 2, l=3: y[131] = 26·15 − 0.5·41; y[163] = 11·0 − 0
	blk[16+96+31] = 0xe0 // chunk 3, l=31: y[223] = 12·0 − 0; y[255] = 1·14 − 0.5·15
	want[0], want[32] = 7.5, 7
	want[131], want[163] = 369.5, 0
	want[223], want[255] = 0, 6.5
	checkDecode(t, "q4_k", blk, want)
}

func TestDecodeQ6K(t *testing.T) {
	blk := make([]byte, 210)
	put16(blk, 208, 0x4000) // d = 2
	sc := []int8{1, 0, -3, 0, 5, 0, 7, 0, 0, -128, 0, 0, 0, 0, 0, 0}
	for i, v := range sc {
		blk[192+i] = byte(v)
	}
	want := make([]float32, 256)
	for i := range want {
		want[i] = 2 * float32(sc[i/16]) * -32 // ql = qh = 0: q − 32 = −32
	}
	// Half 0, l = 0: ql[0] = 0x21, ql[32] = 0x43, qh[0] = 0xe4 (2-bit fields 0,1,2,3).
	blk[0], blk[32], blk[128] = 0x21, 0x43, 0xe4
	want[0] = 2 * 1 * (1 - 32)        // (1 | 0<<4) − 32
	want[32] = 2 * -3 * (3 + 16 - 32) // (3 | 1<<4) − 32
	want[64] = 2 * 5 * (2 + 32 - 32)  // (2 | 2<<4) − 32
	want[96] = 2 * 7 * (4 + 48 - 32)  // (4 | 3<<4) − 32
	// Half 1, l = 17: ql[64+17] = ql[64+49] = 0xff, qh[32+17] = 0xff: q = 63.
	blk[64+17], blk[64+49], blk[128+32+17] = 0xff, 0xff, 0xff
	want[145] = 2 * -128 * 31 // sub-block 9
	want[177], want[209], want[241] = 0, 0, 0
	checkDecode(t, "q6_k", blk, want)
}

func TestDecodeIQ4NL(t *testing.T) {
	blk := make([]byte, 18)
	put16(blk, 0, 0x3800) // d = 0.5
	want := make([]float32, 32)
	for i := range want {
		want[i] = 0.5 * -127 // code 0
	}
	blk[2+0] = 0xf0 // y[0] = 0.5·kv[0], y[16] = 0.5·kv[15] = 0.5·113
	blk[2+5] = 0x98 // y[5] = 0.5·kv[8] = 0.5·1, y[21] = 0.5·kv[9] = 0.5·13
	want[16], want[5], want[21] = 56.5, 0.5, 6.5
	checkDecode(t, "iq4_nl", blk, want)
}

func TestDecodeIQ4XS(t *testing.T) {
	blk := make([]byte, 136)
	put16(blk, 0, 0x3c00) // d = 1
	// ls: ib0 = 33 (dl 1), ib3 = 27 (dl −5), ib7 = 63 (dl 31), the rest 32 (dl 0).
	// scales_l nibbles: ib0 1, ib3 11, ib7 15; scales_h 2-bit fields:
	// 2,2,2,1,2,2,2,3 → 2 + 2<<2 + 2<<4 + 1<<6 + 2<<8 + 2<<10 + 2<<12 + 3<<14 = 0xea6a.
	put16(blk, 2, 0xea6a)
	blk[4], blk[5], blk[6], blk[7] = 0x01, 0xb0, 0x00, 0xf0
	dl := []float32{1, 0, 0, -5, 0, 0, 0, 31}
	want := make([]float32, 256)
	for i := range want {
		want[i] = dl[i/32] * -127
	}
	blk[8+0] = 0x1f       // y[0] = 1·kv[15] = 113, y[16] = 1·kv[1] = −104
	blk[8+16*3+2] = 0x80  // y[98] = −5·kv[0] = 635, y[114] = −5·kv[8] = −5
	blk[8+16*7+15] = 0x77 // y[239] = y[255] = 31·kv[7] = −310
	want[0], want[16] = 113, -104
	want[98], want[114] = 635, -5
	want[239], want[255] = -310, -310
	checkDecode(t, "iq4_xs", blk, want)
}

func TestDecodeIQ2XS(t *testing.T) {
	blk := make([]byte, 74)
	put16(blk, 0, 0x3c00) // d = 1
	blk[66] = 0x31        // group 0: s = 1 → db = 1·1.5·0.25; group 1: s = 3 → db = 3.5·0.25
	// qs[0] = grid 1 | sign 1<<9: iq2xs_grid[1] = 0x080808080808082b (byte 0 = 43,
	// the rest 8), ksigns_iq2xs[1] = 0x81 (values 0 and 7 negative).
	put16(blk, 2, 1|1<<9)
	// qs[2] = grid 2 | sign 3<<9: iq2xs_grid[2] = 0x0808080808081919 (bytes 0, 1 =
	// 25), ksigns_iq2xs[3] = 0x03 (values 0 and 1 negative).
	put16(blk, 2+4, 2|3<<9)
	want := make([]float32, 256)
	for i := range want {
		want[i] = 1 * 0.5 * 0.25 * 8 // s = 0, grid 0 (all 8), no signs
	}
	for i := 0; i < 16; i++ {
		want[i] = 0.375 * 8
		want[16+i] = 0.875 * 8
	}
	want[0], want[7] = -0.375*43, -0.375*8
	want[16], want[17] = -0.875*25, -0.875*25
	checkDecode(t, "iq2_xs", blk, want)
}

func TestTablesParsed(t *testing.T) {
	// Spot checks against ggml-common.h as quoted in the spec.
	if tables.iq2xsGrid[1] != 0x080808080808082b || tables.iq2xsGrid[511] == 0 {
		t.Errorf("iq2xs_grid[1] = %#x", tables.iq2xsGrid[1])
	}
	if tables.ksigns[1] != 0x81 || tables.ksigns[127] != 0xff {
		t.Errorf("ksigns_iq2xs[1], [127] = %#x, %#x; want 0x81, 0xff", tables.ksigns[1], tables.ksigns[127])
	}
	want := [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
	if tables.kvaluesIQ4 != want {
		t.Errorf("kvalues_iq4nl = %v", tables.kvaluesIQ4)
	}
	if _, err := parseTables([]byte(strings.Replace(string(ggmlTablesJSON), `"0x0808080808080808"`, `"0x0808080808080809"`, 1))); err == nil {
		t.Error("a grid byte outside {8, 25, 43} was accepted")
	}
	if _, err := parseTables([]byte(`{"tables": {}}`)); err == nil {
		t.Error("empty tables accepted")
	}
}

func TestRegistry(t *testing.T) {
	for _, c := range []struct {
		name         string
		code, el, by int
	}{
		{"f32", 0, 1, 4}, {"f16", 1, 1, 2}, {"bf16", 30, 1, 2}, {"q8_0", 8, 32, 34},
		{"q4_k", 12, 256, 144}, {"q6_k", 14, 256, 210}, {"iq2_xs", 17, 256, 74},
		{"iq4_nl", 20, 32, 18}, {"iq4_xs", 23, 256, 136},
		{"q4_0", 2, 32, 18}, {"q4_1", 3, 32, 20}, {"q5_0", 6, 32, 22}, {"q5_1", 7, 32, 24},
		{"q2_k", 10, 256, 84}, {"q3_k", 11, 256, 110}, {"q5_k", 13, 256, 176},
		{"iq2_xxs", 16, 256, 66}, {"iq3_xxs", 18, 256, 98}, {"iq2_s", 22, 256, 82}, {"iq3_s", 21, 256, 110},
		{"iq1_s", 19, 256, 50}, {"iq1_m", 29, 256, 56},
	} {
		f := mustFormat(t, c.name)
		if f.Code != c.code || f.BlockElems != c.el || f.BlockBytes != c.by {
			t.Errorf("%s: code %d, block %d/%d; want %d, %d/%d", c.name, f.Code, f.BlockElems, f.BlockBytes, c.code, c.el, c.by)
		}
		if g, err := ByCode(c.code); err != nil || g != f {
			t.Errorf("ByCode(%d) = %v, %v", c.code, g, err)
		}
		if f.Decode == nil || f.Dot == nil || (f.Encode == nil && !strings.HasPrefix(f.Name, "iq")) {
			t.Errorf("%s: missing codec", c.name)
		}
	}
	if f, err := Lookup("Q4_K"); err != nil || f.Name != "q4_k" {
		t.Errorf("Lookup(Q4_K) = %v, %v", f, err)
	}
	if _, err := Lookup("q7_k"); err == nil || !strings.Contains(err.Error(), "iq2_xs") {
		t.Errorf("Lookup(q7_k) error %v should list the known formats", err)
	}
	if _, err := GGMLTypeByCode(4); err == nil {
		t.Error("retired ggml type 4 accepted")
	}
	if ty, err := GGMLTypeByCode(13); err != nil || ty.BlockBytes != 176 || ty.BlockElems != 256 {
		t.Errorf("q5_K traits %+v, %v", ty, err)
	}
}

func gaussian(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 7))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func relRMS(x, y []float32) float64 {
	var e, s float64
	for i := range x {
		d := float64(x[i]) - float64(y[i])
		e += d * d
		s += float64(x[i]) * float64(x[i])
	}
	return math.Sqrt(e / s)
}

func roundTrip(f *Format, x []float32) []float32 {
	b := make([]byte, f.Bytes(len(x)))
	f.Encode(x, b)
	y := make([]float32, len(x))
	f.Decode(b, y)
	return y
}

// roundTripBounds are the RMS error relative to the data's RMS on N(0,1)
// data (65536 values), with some headroom over what we measure (in brackets).
// They follow the bits per weight at about 6 dB a bit, as ggml's formats do:
// q8_0 (8.5 bpw) [0.0054], q6_k (6.56) [0.0175], q4_k (4.5) [0.072],
// iq4_nl (4.5) [0.077], iq4_xs (4.25) [0.077], iq2_xs (2.31) [0.290],
// q5_k (5.5) [0.036], q5_1 (6) [0.038], q5_0 (5.5) [0.043], q4_1 (5)
// [0.078], q4_0 (4.5) [0.086], q3_k (3.44) [0.152], q2_k (2.63) [0.299]; the
// float formats are bounded by their rounding (2^−11 and 2^−8 relative
// half-ulp, /√3 for a uniform error).
var roundTripBounds = map[string]float64{
	"f32": 0, "f16": 3e-4, "bf16": 2.3e-3,
	"q8_0": 0.0065, "q6_k": 0.020, "q4_k": 0.080, "iq4_nl": 0.085, "iq4_xs": 0.085, "iq2_xs": 0.31,
	"q5_k": 0.040, "q5_1": 0.042, "q5_0": 0.050, "q4_1": 0.086, "q4_0": 0.098, "q3_k": 0.165, "q2_k": 0.33,
}

func TestRoundTripError(t *testing.T) {
	x := gaussian(1<<16, 1)
	for _, name := range encodable() {
		bound, ok := roundTripBounds[name]
		if !ok {
			t.Errorf("%s: no round-trip bound", name)
			continue
		}
		e := relRMS(x, roundTrip(mustFormat(t, name), x))
		t.Logf("%-7s relative RMS error %.5f (bound %.4f)", name, e, bound)
		if e > bound {
			t.Errorf("%s: relative RMS error %.5f > %.4f", name, e, bound)
		}
	}
}

// Scale invariance and edge inputs: the quantizers must track the data's
// scale (tiny, large, an outlier) and zeros must stay zeros.
func TestRoundTripEdges(t *testing.T) {
	x := gaussian(1024, 2)
	for _, name := range encodable() {
		f := mustFormat(t, name)
		if f.BlockElems == 1 {
			continue
		}
		bound := roundTripBounds[name]
		for _, scale := range []float32{1e-3, 1e3} {
			xs := make([]float32, len(x))
			for i, v := range x {
				xs[i] = v * scale
			}
			if e := relRMS(xs, roundTrip(f, xs)); e > 1.15*bound {
				t.Errorf("%s: data scaled by %g: relative RMS error %.5f > %.4f", name, scale, e, 1.15*bound)
			}
		}
		zeros := roundTrip(f, make([]float32, 512))
		for i, v := range zeros {
			if v != 0 {
				t.Fatalf("%s: zeros decode to %v at %d", name, v, i)
			}
		}
		// One outlier per block must survive with small relative error.
		xo := make([]float32, len(x))
		copy(xo, x)
		for i := 0; i < len(xo); i += f.BlockElems {
			xo[i+5] = 40
		}
		y := roundTrip(f, xo)
		for i := 0; i < len(xo); i += f.BlockElems {
			if math.Abs(float64(y[i+5])-40) > 40*0.1 {
				t.Errorf("%s: outlier 40 decodes to %v", name, y[i+5])
				break
			}
		}
		// Non-finite inputs must not panic (the output is unspecified).
		bad := make([]float32, 2*f.BlockElems)
		bad[0], bad[1], bad[f.BlockElems] = float32(math.NaN()), float32(math.Inf(1)), 3e38
		roundTrip(f, bad)
	}
}

// randomBlocks returns n blocks of random bytes with finite scales, so every
// bit pattern of the levels and scale codes gets exercised.
func randomBlocks(f *Format, n int, r *rand.Rand) []byte {
	halves := map[string][]int{"q8_0": {0}, "q4_k": {0, 2}, "q6_k": {208}, "iq2_xs": {0}, "iq4_nl": {0}, "iq4_xs": {0},
		"iq2_xxs": {0}, "iq3_xxs": {0}, "iq2_s": {0}, "iq3_s": {0}, "iq1_s": {0}}
	b := make([]byte, n*f.BlockBytes)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	for k := 0; k < n; k++ {
		blk := b[k*f.BlockBytes:]
		for _, off := range halves[f.Name] {
			put16(blk, off, F16(float32(r.NormFloat64())))
		}
	}
	if f.BlockElems == 1 { // plain floats: finite values only
		f.Encode(gaussian(n, r.Uint64()), b)
	}
	return b
}

func TestDotMatchesDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, name := range encodable() {
		f := mustFormat(t, name)
		n := 4 * 256
		x := gaussian(n, 5)
		for trial := 0; trial < 20; trial++ {
			blk := randomBlocks(f, n/f.BlockElems, r)
			if trial%2 == 1 { // and real encodings
				f.Encode(gaussian(n, uint64(trial)), blk)
			}
			y := make([]float32, n)
			f.Decode(blk, y)
			var ref, mag float64
			for i := range y {
				ref += float64(y[i]) * float64(x[i])
				mag += math.Abs(float64(y[i]) * float64(x[i]))
			}
			got := f.Dot(blk, x)
			// The decoder rounds each value to float32 (two roundings at most);
			// Dot keeps the exact products in float64.
			if math.Abs(got-ref) > 3e-7*mag+1e-30 {
				t.Errorf("%s trial %d: Dot %.9g, Decode·x %.9g (Σ|·| %.3g)", name, trial, got, ref, mag)
			}
		}
	}
}

// iq2Naive is a baseline IQ2_XS quantizer without any search: each 16-value
// group's scale puts its largest magnitude on the top level, each 8 values
// take the grid point nearest in plain squared error (checked against all
// 512), and the 4-bit scale is rounded.
func iq2Naive(x []float32, dst []byte) {
	ones := make([]float32, 8)
	for i := range ones {
		ones[i] = 1
	}
	for b := 0; b*256 < len(x); b++ {
		xb := x[256*b : 256*b+256]
		blk := dst[74*b : 74*b+74]
		clear(blk)
		var groups [16]iq2Group
		var maxS float32
		for g := range groups {
			gr := &groups[g]
			w := make([]float32, 16)
			for i := range w {
				w[i] = 1
			}
			gr.prepare(xb[16*g:16*g+16], w)
			var m float32
			for _, v := range gr.t {
				m = max(m, v)
			}
			gr.scale = m / 43
			maxS = max(maxS, gr.scale)
		}
		d := putF16(blk, maxS/3.875)
		for g := range groups {
			gr := &groups[g]
			s := clampInt(nearestInt(gr.scale*4/d-0.5), 0, 15)
			S := d * (0.5 + float32(s)) * 0.25
			blk[66+g/2] |= byte(s) << (4 * (g % 2))
			for k := 0; k < 2; k++ {
				best, bestErr := 0, float32(math.MaxFloat32)
				for i := range iq2Grid {
					if e := iq2Err(&iq2Grid[i], gr.t[8*k:8*k+8], ones, S); e < bestErr {
						best, bestErr = i, e
					}
				}
				put16(blk, 2+2*(2*g+k), uint16(best)|uint16(iq2SignIdx[gr.signs[k]])<<9)
			}
		}
	}
}

func TestIQ2XSBeatsNaive(t *testing.T) {
	f := mustFormat(t, "iq2_xs")
	x := gaussian(64*256, 9)
	naive := make([]byte, f.Bytes(len(x)))
	iq2Naive(x, naive)
	y := make([]float32, len(x))
	f.Decode(naive, y)
	eNaive := relRMS(x, y)
	eOurs := relRMS(x, roundTrip(f, x))
	t.Logf("iq2_xs relative RMS error: searched %.4f, naive nearest-grid %.4f", eOurs, eNaive)
	if eOurs > 0.96*eNaive {
		t.Errorf("searched IQ2_XS error %.4f is not clearly below the naive %.4f", eOurs, eNaive)
	}
}

func TestRowLayout(t *testing.T) {
	cases := []struct {
		name   string
		n      int
		p      RowPolicy
		format string
		stored int
		bytes  int
	}{
		{"iq2_xs", 2560, Smallest, "iq2_xs", 2560, 740},
		{"iq2_xs", 640, Smallest, "iq2_xs", 768, 222},
		{"iq2_xs", 640, Pad, "iq2_xs", 768, 222},
		// llama.cpp v0.5.0's tensor_type_fallback (llama-quant.cpp):
		{"iq2_xs", 640, Fallback, "iq4_nl", 640, 360},
		{"iq2_xs", 32, Smallest, "iq4_nl", 32, 18}, // padding 32 → 256 would cost 74
		{"q4_k", 640, Fallback, "q5_0", 640, 440},
		{"q4_k", 640, Smallest, "q4_k", 768, 432}, // 432 < q5_0's 440
		{"q6_k", 640, Fallback, "q8_0", 640, 680},
		{"q2_k", 640, Fallback, "q4_0", 640, 360}, {"q3_k", 640, Fallback, "q4_0", 640, 360},
		{"q5_k", 640, Fallback, "q5_1", 640, 480},
		{"q6_k", 640, Smallest, "q6_k", 768, 630},
		{"q8_0", 100, Smallest, "q8_0", 128, 136}, // padding (136) beats the f16 fallback (200)
		{"q8_0", 100, Fallback, "f16", 100, 200},  // a 32-block type: f16, as llama.cpp
		{"q8_0", 16, Fallback, "f16", 16, 32},     // tiny-go's 16-wide rows
		{"iq4_nl", 64, Fallback, "iq4_nl", 64, 36},
		{"q4_k", 64, Fallback, "q5_0", 64, 44},
		{"iq2_xs", 16, Fallback, "f16", 16, 32}, // iq4_nl does not divide 16 either
		{"iq4_xs", 100, Fallback, "f16", 100, 200},
		{"q8_0", 100, Pad, "q8_0", 128, 136},
		{"bf16", 7, Fallback, "bf16", 7, 14},
	}
	for _, c := range cases {
		l, err := ForRow(c.name, c.n, c.p)
		if err != nil {
			t.Errorf("ForRow(%s, %d, %v): %v", c.name, c.n, c.p, err)
			continue
		}
		if l.Format.Name != c.format || l.Stored != c.stored || l.RowBytes() != c.bytes || l.Len != c.n {
			t.Errorf("ForRow(%s, %d, %v) = %s, stored %d, %d bytes; want %s, %d, %d", c.name, c.n, c.p, l.Format.Name, l.Stored, l.RowBytes(), c.format, c.stored, c.bytes)
		}
	}
	if _, err := ForRow("iq2_xs", 0, Pad); err == nil {
		t.Error("row length 0 accepted")
	}
	if p, err := ParseRowPolicy("Pad"); err != nil || p != Pad {
		t.Errorf("ParseRowPolicy(Pad) = %v, %v", p, err)
	}
}

func TestPaddedRows(t *testing.T) {
	for _, c := range []struct {
		name string
		n    int
	}{{"iq2_xs", 640}, {"q4_k", 300}, {"q8_0", 100}, {"iq4_xs", 640}} {
		l, err := ForRow(c.name, c.n, Pad)
		if err != nil {
			t.Fatal(err)
		}
		x := gaussian(c.n, 11)
		row := make([]byte, l.RowBytes())
		l.EncodeRow(x, row)
		y := make([]float32, c.n+3)
		y[c.n] = 99 // DecodeRow must not write past Len
		l.DecodeRow(row, y)
		if y[c.n] != 99 {
			t.Errorf("%s/%d: DecodeRow wrote past the row", c.name, c.n)
		}
		if e := relRMS(x, y[:c.n]); e > 1.1*roundTripBounds[c.name] {
			t.Errorf("%s/%d padded: relative RMS error %.4f", c.name, c.n, e)
		}
		// The padding must not cost precision: the whole blocks quantize
		// exactly as they would alone.
		whole := c.n / l.Format.BlockElems * l.Format.BlockElems
		alone := roundTrip(l.Format, x[:whole])
		if !equal32(alone, y[:whole]) {
			t.Errorf("%s/%d: padding changed the whole blocks", c.name, c.n)
		}
		xv := gaussian(c.n, 12)
		var ref float64
		for i := range xv {
			ref += float64(y[i]) * float64(xv[i])
		}
		if got := l.Dot(row, xv); math.Abs(got-ref) > 1e-5*math.Abs(ref)+1e-4 {
			t.Errorf("%s/%d: row Dot %v, DecodeRow·x %v", c.name, c.n, got, ref)
		}
	}
}

// TestFlashNextExpertBytes pins the bytes per routed expert of
// Qwen3.8-Flash-Next (hidden 2560, moe_intermediate_size 640; spec
// qwen4_exp.md §1) under experts=iq2_xs: gate and up are [640, 2560] (rows of
// 2560 = 10 super-blocks), down is [2560, 640] (rows of 640 = 2.5
// super-blocks).
func TestFlashNextExpertBytes(t *testing.T) {
	const H, I = 2560, 640
	perExpert := func(p RowPolicy) int {
		gu, err := ForRow("iq2_xs", H, p)
		if err != nil {
			t.Fatal(err)
		}
		down, err := ForRow("iq2_xs", I, p)
		if err != nil {
			t.Fatal(err)
		}
		return 2*I*gu.RowBytes() + H*down.RowBytes()
	}
	// gate + up: 2·640·10·74 = 947200; down padded: 2560·3·74 = 568320.
	if got := perExpert(Smallest); got != 1515520 {
		t.Errorf("padded (in memory only): %d bytes per expert, want 1515520", got)
	}
	// down as IQ4_NL: 2560·20·18 = 921600.
	if got := perExpert(Fallback); got != 1868800 {
		t.Errorf("default (llama.cpp fallback) plan: %d bytes per expert, want 1868800", got)
	}
}

func BenchmarkDot(b *testing.B) {
	const n = 4096
	x := gaussian(n, 1)
	for _, name := range encodable() {
		f := mustFormat(b, name)
		blk := make([]byte, f.Bytes(n))
		f.Encode(gaussian(n, 2), blk)
		b.Run(name, func(b *testing.B) {
			var s float64
			for b.Loop() {
				s += f.Dot(blk, x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n/256), "ns/256elem")
			_ = s
		})
	}
}

func BenchmarkDecode(b *testing.B) {
	const n = 4096
	y := make([]float32, n)
	for _, name := range encodable() {
		f := mustFormat(b, name)
		blk := make([]byte, f.Bytes(n))
		f.Encode(gaussian(n, 2), blk)
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				f.Decode(blk, y)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n/256), "ns/256elem")
		})
	}
}

// BenchmarkEncodeIQ2XS quantizes one 512×2048 matrix (a Qwen3-Next expert's
// gate projection).
func BenchmarkEncodeIQ2XS(b *testing.B) {
	f := mustFormat(b, "iq2_xs")
	x := gaussian(512*2048, 3)
	dst := make([]byte, f.Bytes(len(x)))
	iq2Search() // the one-off table build is not part of a matrix's cost
	for b.Loop() {
		f.Encode(x, dst)
	}
}

func BenchmarkEncode(b *testing.B) {
	const n = 1 << 16
	x := gaussian(n, 4)
	for _, name := range encodable() {
		f := mustFormat(b, name)
		dst := make([]byte, f.Bytes(n))
		if name == "iq2_xs" {
			iq2Search()
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				f.Encode(x, dst)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n/256), "ns/256elem")
		})
	}
}

// encodable lists the formats with a quantizer (the decode-only IQ formats
// are tested on ggml's blocks, ggml_blocks_test.go).
func encodable() []string {
	var out []string
	for _, name := range Names() {
		if f, _ := Lookup(name); f.Encode != nil {
			out = append(out, name)
		}
	}
	return out
}
