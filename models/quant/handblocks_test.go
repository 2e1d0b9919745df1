package quant

import "testing"

// Blocks built by hand from ggml's layouts (ggml-common.h, as
// ../shared/specs/ggml_formats.md §9 describes them), with the expected
// values worked out by hand in the comments: each pins where a field lives
// and how it combines, independently of ggml's test files.
func TestHandBuiltBlocks(t *testing.T) {
	type want struct {
		elem int
		v    float32
	}
	for _, c := range []struct {
		format string
		set    map[int]byte // byte offset → value; everything else zero
		want   []want
	}{
		// d = 0.5; qs[0] = 0x1f: element 0 = (15−8)·0.5, element 16 = (1−8)·0.5;
		// zero bytes: (0−8)·0.5.
		{"q4_0", map[int]byte{0: 0x00, 1: 0x38, 2: 0x1f}, []want{{0, 3.5}, {16, -3.5}, {1, -4}, {31, -4}}},
		// d = 0.5, m = −1; qs[0] = 0x1f: 15·0.5 − 1, 1·0.5 − 1; zero bytes: −1.
		{"q4_1", map[int]byte{1: 0x38, 3: 0xbc, 4: 0x1f}, []want{{0, 6.5}, {16, -0.5}, {1, -1}}},
		// d = 0.25; qh bits 0 and 17; qs[0] = 0x03, qs[1] = 0xf0:
		// e0 = (3|16)−16 = 3 → 0.75; e16 = 0−16 → −4; e1 = −16 → −4; e17 = (15|16)−16 → 3.75.
		{"q5_0", map[int]byte{1: 0x34, 2: 0x01, 4: 0x02, 6: 0x03, 7: 0xf0}, []want{{0, 0.75}, {16, -4}, {1, -4}, {17, 3.75}}},
		// d = 0.5, m = 2; qh bit 31; qs[15] = 0xa0: e15 = 0·0.5 + 2, e31 = (10|16)·0.5 + 2 = 15.
		{"q5_1", map[int]byte{1: 0x38, 3: 0x40, 7: 0x80, 8 + 15: 0xa0}, []want{{15, 2}, {31, 15}, {0, 2}}},
		// d = 1 @80, dmin = 0.5 @82; scales[0] = 0x21 (scale 1, min 2): group 0 is q − 1;
		// scales[5] = 0x13 (scale 3, min 1): group 5 is 3q − 0.5. qs @16: byte 16 bits 0–1
		// (element 0) = 0, byte 17 = 3 (element 1); element 80 = byte 16 + 16 at bits 4–5 = 2.
		{"q2_k", map[int]byte{81: 0x3c, 83: 0x38, 0: 0x21, 5: 0x13, 16: 0xe4, 17: 0x03, 32: 0x20},
			[]want{{0, -1}, {1, 2}, {2, -1}, {80, 5.5}, {81, -0.5}}},
		// d = 0.5 @108; group 0: low nibble 2 (byte 96), high bits 2 (byte 104 bits 0–1) →
		// 34 − 32 = 2; group 9: low nibble 13 (byte 97 high), high bits 1 (byte 105 bits
		// 4–5) → 29 − 32 = −3. Element 0: qs byte 32 = 3, hmask[0] bit 0 set → 3 → 0.5·2·3;
		// element 1: level 0, hmask clear → −4 → −4. Element 144 (group 9): qs byte
		// 32 + 32 + 16 = 80 = 2, hmask[16] bit 4 set → 2 → 0.5·(−3)·2; element 145: −4 → 6.
		{"q3_k", map[int]byte{109: 0x38, 96: 0x02, 104: 0x02, 97: 0xd0, 105: 0x10, 32: 0x03, 0: 0x01, 80: 0x02, 16: 0x10},
			[]want{{0, 3}, {1, -4}, {144, -3}, {145, 6}}},
		// d = 1, dmin = 0.25; sub-block 0: scale 3 (byte 4), min 4 (byte 8) → 3q − 1;
		// sub-block 5: scale (byte 13 & 15 = 1) | (byte 5 >> 6 = 1) << 4 = 17, min
		// (byte 13 >> 4 = 2) | (byte 9 >> 6 = 0) << 4 = 2 → 17q − 0.5. Element 0: qs byte 48
		// low nibble 7, qh[0] bit 0 → 23 → 68. Element 165 (sub-block 5, pair 2, high
		// nibble, l = 5): qs byte 48 + 64 + 5 = 117 high nibble 9, qh[5] bit 5 → 25 → 424.5.
		{"q5_k", map[int]byte{1: 0x3c, 3: 0x34, 4: 3, 8: 4, 13: 0x21, 5: 0x40, 48: 0x07, 16: 0x01, 117: 0x90, 21: 0x20},
			[]want{{0, 68}, {1, -1}, {165, 424.5}, {166, -0.5}, {133, 0}}},
	} {
		f := mustFormat(t, c.format)
		blk := make([]byte, f.BlockBytes)
		for off, v := range c.set {
			blk[off] = v
		}
		y := make([]float32, f.BlockElems)
		f.Decode(blk, y)
		for _, w := range c.want {
			if y[w.elem] != w.v {
				t.Errorf("%s: element %d = %v, want %v", c.format, w.elem, y[w.elem], w.v)
			}
		}
	}
}
