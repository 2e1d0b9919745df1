package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/strata-llm/strata/models/quant/asm/emit"
)

// k16 is a k-quant whose 256-value blocks carry a scale and an offset per
// 16 values (q2_k, q3_k, q6_k): y = d·sc_g·u − off_g with u an unsigned
// level and off_g = by·o_g, o_g an integer, so per activation block of 32
// the integer dot is VPMADDUBSW(u, a) and VPMADDWD by the block's two
// scales, and the offsets meet the activation's sums per 16 once per 256
// values: the one-row kernel weighs the integer sums (quant.Act8's G) by
// the o_g with one VPMADDWD, giving one int32 per activation block, times
// by·D_j; the four-row kernel the float sums (H) by the off_g as float32.
type k16 struct {
	name string // as in the kernel's name: dot<name>Q8AVX2
	desc string // the format in the doc comment
	size int    // bytes per block
	// scales emits the constants it needs (before the loop) and returns a
	// function emitting the block at p's scales and offsets.
	scales func() func(p reg.Register) k16Scales
	// levels emits the constants its level function needs (before the
	// loop) and returns it: per block at p, a function of activation block
	// blk (0..7) giving its 32 unsigned levels, in value order.
	levels func() func(p reg.Register) func(blk int) reg.VecVirtual
}

// k16Scales are a k16 block's 16 scales sc_g and offset factors o_g as
// int16 words, the offsets' float factor by and d (float32 scalars in an
// xmm's low lane).
type k16Scales struct {
	words, offWords reg.VecVirtual
	by, d           reg.VecVirtual
}

// offFloats are the block's 16 offsets by·o_g as float32, in two vectors
// of 8 (the four-row kernels' H takes them).
func (s k16Scales) offFloats() [2]reg.VecVirtual {
	hi := XMM()
	VEXTRACTI128(U8(1), s.offWords, hi)
	by := YMM()
	VBROADCASTSS(s.by, by)
	var out [2]reg.VecVirtual
	for i, w := range []reg.Register{s.offWords.AsX(), hi} {
		v := YMM()
		VPMOVSXWD(w, v)
		VCVTDQ2PS(v, v)
		VMULPS(by, v, v)
		out[i] = v
	}
	return out
}

// k16Masks are the VPSHUFB masks that spread int16 words 2k (low 128
// bits) and 2k+1 (high) of a 128-bit half of 8 words over 8 words each,
// k < 4: the two scales of activation block 4·half + k.
func k16Masks() Mem {
	if k16MasksSym != nil {
		return *k16MasksSym
	}
	m := GLOBL("k16ScaleMasks", RODATA|NOPTR)
	k16MasksSym = &m
	for k := range 4 {
		for i := range 32 {
			w := 2 * k
			if i >= 16 {
				w++
			}
			DATA(32*k+i, U8(uint8(2*w+i%2)))
		}
	}
	return m
}

var k16MasksSym *Mem

// k16Sig are the kernels' signatures: one row (h the activation's sums
// per 16 values, two per scale of d) and four rows at equal strides (h's
// stride twice dstride).
var (
	k16Sig   = "func(" + fmt.Sprintf(rowsParamsG, "g16") + ") float32"
	k16x4Sig = "func(blk *byte, q *int8, d *float32, h *float32, qstride, dstride, nblk int, out *[4]float32)"
)

// dotK16 emits f's integer dot for rows activation rows (1 or 4): per
// block the scales, offsets and levels are built once for the rows.
func dotK16(f k16, rows int) {
	sums := "h"
	if rows == 1 {
		sums = "g16"
	}
	a := sumsPrologue(f.name, f.desc, rows, k16Sig, k16x4Sig, sums,
		"g16[j] being Σ q of values 16j…16j+15 (int16); in integers per 32 values.", "h_r = h + 2r·dstride bytes.")
	p, d, h, n := a.p, a.d, a.sums, a.n
	masks := k16Masks()
	levels, scales := f.levels(), f.scales()
	fs := AllocLocal(32 * rows) // per row r: d_w·d_r[j] for the block's 8 activation blocks
	a.beginRow()
	// four accumulators either way: one row's FMAs go round them, so that
	// their latency does not chain the eight blocks of 32
	acc := emit.Zeroed(4)
	accOf := func(r, blk int) reg.VecVirtual {
		if rows == 1 {
			return acc[blk&3]
		}
		return acc[r]
	}
	label := fmt.Sprintf("%s_%d", f.name, rows)
	emit.Loop(label, n, func() {
		prefetchLines(p, f.size)
		sc := scales(p)
		words, dw := sc.words, sc.d
		if rows == 1 {
			// the offsets: acc −= Σ_j by·D_j·(o_2j·G_2j + o_2j+1·G_2j+1)
			t, by := YMM(), YMM()
			VPMADDWD(Mem{Base: h}, sc.offWords, t)
			VCVTDQ2PS(t, t)
			VBROADCASTSS(sc.by, by)
			VMULPS(Mem{Base: d}, by, by)
			VFNMADD231PS(by, t, acc[2])
		} else {
			// the offsets: acc −= Σ_g off_g·h[g]
			off := sc.offFloats()
			a.each([]rowArray{{h, 2}}, func(r int, m []Mem) {
				VFNMADD231PS(m[0], off[0], accOf(r, 2))
				VFNMADD231PS(m[0].Offset(32), off[1], accOf(r, 3))
			})
		}
		dwy := YMM()
		VBROADCASTSS(dw, dwy)
		a.each([]rowArray{{d, 1}}, func(r int, m []Mem) {
			blockScales(dwy, m[0], fs.Offset(32*r))
		})
		sv := [2]reg.VecVirtual{YMM(), YMM()} // scales 0-7, 8-15 in both 128-bit halves
		VPERMQ(U8(0x44), words, sv[0])
		VPERMQ(U8(0xee), words, sv[1])
		level := levels(p)
		for blk := range 8 {
			u := level(blk)
			scl := YMM()
			VPSHUFB(masks.Offset(32*(blk%4)), sv[blk/4], scl)
			for r := range rows {
				x := YMM()
				VPMADDUBSW(a.level(r, 32*blk), u, x)
				VPMADDWD(scl, x, x)
				scaleFMA(x, fs.Offset(32*r+4*blk), accOf(r, blk))
			}
		}
		ADDQ(U32(uint32(f.size)), p)
		a.advance(256)
		ADDQ(U32(32), d)
		if rows == 1 {
			ADDQ(U32(32), h)
		} else {
			ADDQ(U32(64), h)
		}
	})
	a.endRow(acc)
}

// Q2_K: 84-byte blocks of 256: scales[16] @0 (per 16 values, low nibble
// the scale, high nibble the min), qs[64] @16, d f16 @80, dmin f16 @82;
// y = d·sc·q − dmin·m. Activation block 4h+j is bits 2j, 2j+1 of
// qs[32h : 32h+32], in order; its scales are bytes 2(4h+j) and 2(4h+j)+1.
var q2k = k16{
	name: "Q2K", desc: "q2_K", size: 84,
	scales: func() func(p reg.Register) k16Scales {
		m4 := emit.BroadcastByte(0x0f).AsX()
		return func(p reg.Register) k16Scales {
			b, sc, mn := XMM(), XMM(), XMM()
			VMOVDQU(Mem{Base: p}, b)
			VPAND(m4, b, sc)
			VPSRLW(U8(4), b, mn)
			VPAND(m4, mn, mn)
			words, mins := YMM(), YMM()
			VPMOVZXBW(sc, words)
			VPMOVZXBW(mn, mins)
			return k16Scales{words: words, offWords: mins, by: emit.F16Scalar(Mem{Base: p, Disp: 82}), d: emit.F16Scalar(Mem{Base: p, Disp: 80})}
		}
	},
	levels: func() func(p reg.Register) func(blk int) reg.VecVirtual {
		m3 := emit.BroadcastByte(0x03)
		return func(p reg.Register) func(blk int) reg.VecVirtual {
			var qv reg.VecVirtual
			return func(blk int) reg.VecVirtual { return twoBits(p, 16, blk, m3, &qv) }
		}
	},
}

// Q3_K: 110-byte blocks of 256: hmask[32] @0, qs[64] @32, 12 bytes of
// sixteen 6-bit scales @96, d f16 @108; y = d·(sc−32)·(q−4), q the two
// bits of qs (as q2_K's) and bit 4h+j of hmask[l] above them. As an
// unsigned level u = q, the −4 is an offset per 16 values: 4·d·(sc−32).
var q3k = k16{
	name: "Q3K", desc: "q3_K", size: 110,
	scales: func() func(p reg.Register) k16Scales {
		c32 := emit.BroadcastByte(32).AsX()
		return func(p reg.Register) k16Scales {
			// ggml's unpacking: scales 0-3 and 4-7 the low nibbles of bytes
			// 0-3 and 4-7, 8-11 and 12-15 their high nibbles; the two high
			// bits of scale 4k+i are bits 2k, 2k+1 of byte 8+i.
			a0, a1, tmp := GP64(), GP64(), GP64()
			MOVL(Mem{Base: p, Disp: 96}, a0.As32())
			MOVL(Mem{Base: p, Disp: 100}, a1.As32())
			MOVL(Mem{Base: p, Disp: 104}, tmp.As32())
			aux := func(a reg.GPVirtual, nib, hi int) reg.GPVirtual {
				lo, t := GP64(), GP64()
				MOVL(a.As32(), lo.As32())
				if nib > 0 {
					SHRL(U8(nib), lo.As32())
				}
				ANDL(U32(0x0f0f0f0f), lo.As32())
				MOVL(tmp.As32(), t.As32())
				if hi > 0 {
					SHRL(U8(hi), t.As32())
				}
				ANDL(U32(0x03030303), t.As32())
				SHLL(U8(4), t.As32())
				ORL(t.As32(), lo.As32())
				return lo
			}
			s0, s1 := aux(a0, 0, 0), aux(a1, 0, 2)
			SHLQ(U8(32), s1)
			ORQ(s1, s0)
			s2, s3 := aux(a0, 4, 4), aux(a1, 4, 6)
			SHLQ(U8(32), s3)
			ORQ(s3, s2)
			x := XMM()
			VMOVQ(s0, x)
			VPINSRQ(U8(1), s2, x, x)
			VPSUBB(c32, x, x)
			words := YMM()
			VPMOVSXBW(x, words)
			d := emit.F16Scalar(Mem{Base: p, Disp: 108})
			by := XMM() // 4·d: the −4 per 16 values
			VADDSS(d, d, by)
			VADDSS(by, by, by)
			return k16Scales{words: words, offWords: words, by: by, d: d}
		}
	},
	levels: func() func(p reg.Register) func(blk int) reg.VecVirtual {
		m3, c4 := emit.BroadcastByte(0x03), emit.BroadcastByte(0x04)
		return func(p reg.Register) func(blk int) reg.VecVirtual {
			hm := YMM()
			VMOVDQU(Mem{Base: p}, hm)
			var qv reg.VecVirtual
			return func(blk int) reg.VecVirtual {
				u := twoBits(p, 32, blk, m3, &qv)
				hb := bitTo(hm, blk, 2, c4) // bit blk of hmask above the two bits
				VPOR(hb, u, u)
				return u
			}
		}
	},
}

// twoBits returns activation block blk's levels in q2_K's and q3_K's qs
// (at p+off): bits 2j, 2j+1 of the 32 bytes at off + 32h, h, j = blk/4,
// blk%4; those bytes are loaded into *qv at j = 0 and kept for the next
// three blocks.
func twoBits(p reg.Register, off, blk int, m3 reg.VecVirtual, qv *reg.VecVirtual) reg.VecVirtual {
	h, j := blk/4, blk%4
	if j == 0 {
		*qv = YMM()
		VMOVDQU(Mem{Base: p, Disp: off + 32*h}, *qv)
	}
	u := YMM()
	if j == 0 {
		VPAND(m3, *qv, u)
	} else {
		VPSRLW(U8(2*j), *qv, u)
		VPAND(m3, u, u)
	}
	return u
}

// k32 is a k-quant whose 256-value blocks carry a 6-bit scale and min per
// 32 values, packed as q4_K's (q4_k, q5_k): y = d·sc·u − dmin·m, u an
// unsigned level. The mins meet the activation's sums per block (Act8.S).
type k32 struct {
	name, desc string
	size       int
	// levels emits its constants (before the loop) and returns, per block
	// at p, the function of sub-block sb (0..7) giving its 32 levels.
	levels func() func(p reg.Register) func(sb int) reg.VecVirtual
}

var (
	k32Sig   = "func(" + fmt.Sprintf(rowsParams, "s") + ") float32"
	k32x4Sig = "func(blk *byte, q *int8, d *float32, s *float32, qstride, dstride, nblk int, out *[4]float32)"
)

// dotK32 emits f's integer dot for rows activation rows (1, 2, 4 or 8): per
// block the scales, mins and levels are built once for the rows.
func dotK32(f k32, rows int) {
	a := sumsPrologue(f.name, f.desc, rows, k32Sig, k32x4Sig, "s",
		"s[j] being d[j]·Σ q of block j; in integers per 32 values.", "s_r = s + r·dstride bytes.")
	p, d, s, n := a.p, a.d, a.sums, a.n
	ones := onesW()
	levels := f.levels()
	fs := AllocLocal(32 * rows) // per row r: scale_j·d_w·d_r[j] for the block's 8 sub-blocks
	a.beginRow()
	nacc := 4 // one row: its FMAs go round four accumulators
	if rows > 1 {
		nacc = rows
	}
	acc := emit.Zeroed(nacc)
	accOf := func(r, sb int) reg.VecVirtual {
		if rows == 1 {
			return acc[sb&3]
		}
		return acc[r]
	}
	emit.Loop(fmt.Sprintf("%s_%d", f.name, rows), n, func() {
		prefetchLines(p, f.size)
		scf, mnf := q4kScales(p) // 8 float32 scales·d, mins·dmin
		a.each([]rowArray{{d, 1}, {s, 1}}, func(r int, m []Mem) {
			VFNMADD231PS(m[1], mnf, accOf(r, 3)) // acc −= Σ_j mins[j]·s[j]
			blockScales(scf, m[0], fs.Offset(32*r))
		})
		level := levels(p)
		for sb := range 8 {
			u := level(sb)
			for r := range rows {
				x := u
				if rows > 1 {
					x = YMM()
				}
				VPMADDUBSW(a.level(r, 32*sb), u, x)
				VPMADDWD(ones, x, x)
				scaleFMA(x, fs.Offset(32*r+4*sb), accOf(r, sb))
			}
		}
		ADDQ(U32(uint32(f.size)), p)
		a.advance(256)
		ADDQ(U32(32), d)
		ADDQ(U32(32), s)
	})
	a.endRow(acc)
}

// dotK32K emits f's kernel of rows rows (2, 4 or 8) for activations with one scale per
// 256 values (quant.Act8.Quantize256): per row and 32 values VPMADDUBSW of
// the levels, VPMADDWD by the sub-block's 6-bit scale (in both words of
// every dword) and an integer add, the block's eight sub-blocks summed in
// int32 (|Σ| ≤ 8·63·2·2·31·127 for q5_K), then converted and multiplied
// by d_w·D_r once per block and row (D_r the row's scale of the 256,
// d_r[0] of the block), where dotK32 converts and multiplies per 32. The
// mins meet the sums per 32 as in dotK32. The float accumulators live in
// the frame, as dotIQx8K's.
func dotK32K(f k32, rows int) {
	name := fmt.Sprintf("dot%sQ8Kx%dAVX2", f.name, rows)
	TEXT(name, NOSPLIT, strings.Replace(k32x4Sig, "*[4]float32", fmt.Sprintf("*[%d]float32", rows), 1))
	Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk " + f.desc + " blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride, s_r = s + r·dstride bytes (s[j] = d[j]·Σ q of block j), each row with one scale per 256 values (d_r[8k] … d_r[8k+7] equal; d_r[8k] is read).")
	p, q, d, s := Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64()), Load(Param("s"), GP64())
	qs, ds := Load(Param("qstride"), GP64()), Load(Param("dstride"), GP64())
	rs := newRowSet(rows, q, qs, ds)
	n := Load(Param("nblk"), GP64())
	levels := f.levels()
	scl := AllocLocal(32)         // the 6-bit scale of sub-block j in both words of dword j
	accm := AllocLocal(32 * rows) // per row r: its float accumulator
	z := YMM()
	VXORPS(z, z, z)
	for r := range rows {
		VMOVUPS(z, accm.Offset(32*r))
	}
	emit.Loop(fmt.Sprintf("%s_%dk", strings.ToLower(f.name), rows), n, func() {
		prefetchLines(p, f.size)
		sc, _ := q4kScaleInts(p, true, false)
		t := YMM()
		VPSLLD(U8(16), sc, t)
		VPOR(t, sc, t)
		VMOVDQU(t, scl)
		level := levels(p)
		iacc := make([]reg.VecVirtual, rows)
		for sb := range 8 {
			u := level(sb)
			bc := YMM()
			VPBROADCASTD(scl.Offset(4*sb), bc)
			for r := range rows {
				x := YMM()
				VPMADDUBSW(rs.level(r, 32*sb), u, x)
				VPMADDWD(bc, x, x)
				if sb == 0 {
					iacc[r] = x
				} else {
					VPADDD(x, iacc[r], iacc[r])
				}
			}
		}
		_, mn := q4kScaleInts(p, false, true)
		VCVTDQ2PS(mn, mn)
		dmy := YMM()
		VBROADCASTSS(emit.F16Scalar(Mem{Base: p, Disp: 2}), dmy)
		VMULPS(dmy, mn, mn) // mins·dmin
		dwy := YMM()
		VBROADCASTSS(emit.F16Scalar(Mem{Base: p}), dwy)
		rs.each([]rowArray{{d, 1}, {s, 1}}, func(r int, m []Mem) {
			a := YMM()
			VMOVUPS(accm.Offset(32*r), a)
			VFNMADD231PS(m[1], mn, a) // a −= Σ_j mins[j]·s[j]
			fr := YMM()
			VBROADCASTSS(m[0], fr)
			VMULPS(dwy, fr, fr)
			VCVTDQ2PS(iacc[r], iacc[r])
			VFMADD231PS(fr, iacc[r], a)
			VMOVUPS(a, accm.Offset(32*r))
		})
		ADDQ(U32(uint32(f.size)), p)
		ADDQ(U32(256), q)
		rs.advance(256)
		ADDQ(U32(32), d)
		ADDQ(U32(32), s)
	})
	storeFrameOut(accm, rows)
}

// Q4_K: 144-byte blocks of 256: d f16 @0, dmin f16 @2, 12 bytes of 6-bit
// scales and mins @4, qs[128] @16; sub-block 2c the low nibbles of
// qs[32c:32c+32], 2c+1 their high nibbles.
var q4k = k32{
	name: "Q4K", desc: "q4_K", size: 144,
	levels: func() func(p reg.Register) func(sb int) reg.VecVirtual {
		m4 := emit.BroadcastByte(0x0f)
		return func(p reg.Register) func(sb int) reg.VecVirtual {
			return func(sb int) reg.VecVirtual {
				return nibbles(Mem{Base: p, Disp: 16 + 32*(sb/2)}, sb%2, m4)
			}
		}
	},
}

// Q5_K: 176-byte blocks of 256: d, dmin f16 @0, @2, q4_K's scales @4,
// qh[32] @16, qs[128] @48: sub-block sb is q4_K's nibbles of qs with bit
// sb of qh[l] above them (u in 0..31).
var q5k = k32{
	name: "Q5K", desc: "q5_K", size: 176,
	levels: func() func(p reg.Register) func(sb int) reg.VecVirtual {
		m4, c16 := emit.BroadcastByte(0x0f), emit.BroadcastByte(0x10)
		return func(p reg.Register) func(sb int) reg.VecVirtual {
			qh := YMM()
			VMOVDQU(Mem{Base: p, Disp: 16}, qh)
			return func(sb int) reg.VecVirtual {
				u := nibbles(Mem{Base: p, Disp: 48 + 32*(sb/2)}, sb%2, m4)
				VPOR(bitTo(qh, sb, 4, c16), u, u)
				return u
			}
		}
	},
}

// nibbles returns the low (half 0) or high (half 1) nibbles of the 32
// bytes at m (the low ones straight from memory, one instruction).
func nibbles(m Mem, half int, m4 reg.VecVirtual) reg.VecVirtual {
	w := YMM()
	if half == 0 {
		VPAND(m, m4, w)
		return w
	}
	VMOVDQU(m, w)
	VPSRLW(U8(4), w, w)
	VPAND(m4, w, w)
	return w
}

// bitTo returns bit `from` of every byte of v moved to bit `to` (mask is
// 1<<to in every byte), other bits clear. A word shift: the bits that
// cross between a word's bytes land outside bit `to` for from, to < 8.
func bitTo(v reg.VecVirtual, from, to int, mask reg.VecVirtual) reg.VecVirtual {
	b := YMM()
	switch {
	case from < to:
		VPSLLW(U8(to-from), v, b)
		VPAND(mask, b, b)
	case from == to:
		VPAND(mask, v, b)
	default:
		VPSRLW(U8(from-to), v, b)
		VPAND(mask, b, b)
	}
	return b
}
