package quant

import "encoding/binary"

// ggml's 32-element "legacy" formats (../shared/specs/ggml_formats.md §9,
// ggml-common.h block_q4_0 … block_q5_1):
//
//	Q4_0 (type 2), 18 bytes: d f16 @0, qs[16] @2; y = d·(q − 8)
//	Q4_1 (type 3), 20 bytes: d f16 @0, m f16 @2, qs[16] @4; y = d·q + m
//	Q5_0 (type 6), 22 bytes: d f16 @0, qh u32 @2, qs[16] @6; y = d·(q − 16)
//	Q5_1 (type 7), 24 bytes: d f16 @0, m f16 @2, qh u32 @4, qs[16] @8; y = d·q + m
//
// Byte j of qs holds element j in its low nibble and element j + 16 in its
// high one; bit j of qh is the fifth bit of element j. The quantizers are
// ggml's quantize_row_*_ref: the scale from the extreme value, levels by
// truncating x/d + offset (not rounding to even), with the unrounded scale's
// reciprocal, which is what makes them reproducible bit for bit.

const legacyElems = 32

// legacyLayout is where a 32-element block keeps its fields.
type legacyLayout struct {
	bytes int
	minAt int // offset of m, or -1 (symmetric formats)
	qhAt  int // offset of qh, or -1 (4-bit formats)
	qsAt  int
	bits  int // 4 or 5
}

var (
	layoutQ4_0 = legacyLayout{18, -1, -1, 2, 4}
	layoutQ4_1 = legacyLayout{20, 2, -1, 4, 4}
	layoutQ5_0 = legacyLayout{22, -1, 2, 6, 5}
	layoutQ5_1 = legacyLayout{24, 2, 4, 8, 5}
)

// levels returns the 32 unsigned levels of one block.
func (l legacyLayout) levels(blk []byte, q *[legacyElems]int) {
	var qh uint32
	if l.qhAt >= 0 {
		qh = binary.LittleEndian.Uint32(blk[l.qhAt:])
	}
	qs := blk[l.qsAt : l.qsAt+16]
	for j, b := range qs {
		q[j] = int(b&15) | int(qh>>j&1)<<4
		q[j+16] = int(b>>4) | int(qh>>(j+16)&1)<<4
	}
}

func (l legacyLayout) decode(src []byte, dst []float32) {
	var q [legacyElems]int
	off := 1 << (l.bits - 1) // symmetric formats centre the levels
	for b := 0; b*legacyElems < len(dst); b++ {
		blk := src[b*l.bytes : (b+1)*l.bytes]
		y := dst[b*legacyElems : (b+1)*legacyElems]
		d := f16At(blk)
		l.levels(blk, &q)
		if l.minAt < 0 {
			for j := range y {
				y[j] = float32(q[j]-off) * d
			}
			continue
		}
		m := f16At(blk[l.minAt:])
		for j := range y {
			y[j] = float32(q[j])*d + m
		}
	}
}

func (l legacyLayout) dot(src []byte, x []float32) float64 {
	var q [legacyElems]int
	off := 1 << (l.bits - 1)
	var s float64
	for b := 0; b*legacyElems < len(x); b++ {
		blk := src[b*l.bytes : (b+1)*l.bytes]
		xb := x[b*legacyElems : (b+1)*legacyElems]
		l.levels(blk, &q)
		var qx, sx float64
		for j, v := range xb {
			qx += float64(q[j]) * float64(v)
			sx += float64(v)
		}
		if l.minAt < 0 {
			s += float64(f16At(blk)) * (qx - float64(off)*sx)
		} else {
			s += float64(f16At(blk))*qx + float64(f16At(blk[l.minAt:]))*sx
		}
	}
	return s
}

// pack stores the 32 levels of a block.
func (l legacyLayout) pack(blk []byte, q *[legacyElems]uint8) {
	var qh uint32
	for j := 0; j < 16; j++ {
		blk[l.qsAt+j] = q[j]&15 | q[j+16]&15<<4
		qh |= uint32(q[j]>>4&1)<<j | uint32(q[j+16]>>4&1)<<(j+16)
	}
	if l.qhAt >= 0 {
		binary.LittleEndian.PutUint32(blk[l.qhAt:], qh)
	}
}

// encode is quantize_row_q{4,5}_{0,1}_ref.
func (l legacyLayout) encode(src []float32, dst []byte) {
	var q [legacyElems]uint8
	top := int32(1<<l.bits - 1)
	for b := 0; b*legacyElems < len(src); b++ {
		x := src[b*legacyElems : (b+1)*legacyElems]
		blk := dst[b*l.bytes : (b+1)*l.bytes]
		if l.minAt < 0 {
			// The signed value of largest magnitude lands on the lowest level.
			var amax, mx float32
			for _, v := range x {
				if amax < abs32(v) {
					amax, mx = abs32(v), v
				}
			}
			d := mx / -float32(int(1)<<(l.bits-1))
			var id float32
			if d != 0 {
				id = 1 / d
			}
			putF16(blk, d)
			bias := float32(int(1)<<(l.bits-1)) + 0.5
			for j, v := range x {
				// C's (int8_t)(x·id + bias), then MIN(top, ·).
				t := int8(int32(v*id + bias))
				q[j] = uint8(min(int32(t), top))
			}
		} else {
			lo, hi := x[0], x[0]
			for _, v := range x {
				lo, hi = min(lo, v), max(hi, v)
			}
			d := (hi - lo) / float32(top)
			var id float32
			if d != 0 {
				id = 1 / d
			}
			putF16(blk, d)
			putF16(blk[l.minAt:], lo)
			for j, v := range x {
				t := int32((v-lo)*id + 0.5)
				if l.bits == 4 {
					q[j] = uint8(min(int32(int8(t)), top)) // MIN(15, (int8_t)·)
				} else {
					q[j] = uint8(t) // ggml's q5_1 does not clamp: the level is at most 31 by construction
				}
			}
		}
		l.pack(blk, &q)
	}
}
