package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/strata-llm/strata/models/quant/asm/emit"
)

// The four-row kernels of q6_k and iq2_xs (prefill's integer dots of the
// formats a llama.cpp user's experts and heads come in); q4_k's is
// dotK32(q4k, 4).

// Q6_K as a k16 format (its one-row and four-row kernels): 210-byte blocks of 256,
// ql[128] @0, qh[64] @128, int8 scales[16] @192 (one per 16 values), d f16
// @208; y = d·sc·(u−32), u the unsigned six-bit level (emit.Q6KLevels'
// order: activation block 4h+c is quarter c of half h). The −32 is an
// offset per 16 values, 32·d·sc, that meets the activation's sums per 16:
// VPMADDUBSW then takes u (0..63) as it is, one VPSIGNB per row fewer than
// signed levels.
var q6k = k16{
	name: "Q6K", desc: "q6_K", size: 210,
	scales: func() func(p reg.Register) k16Scales {
		t := GP32()
		MOVL(U32(0x42000000), t) // 32.0
		c32f := XMM()
		VMOVD(t, c32f)
		return func(p reg.Register) k16Scales {
			words := YMM()
			VPMOVSXBW(Mem{Base: p, Disp: 192}, words)
			d := emit.F16Scalar(Mem{Base: p, Disp: 208})
			d32 := XMM()
			VMULSS(c32f, d, d32)
			return k16Scales{words: words, offWords: words, by: d32, d: d}
		}
	},
	levels: func() func(p reg.Register) func(blk int) reg.VecVirtual {
		m4, m30 := emit.BroadcastByte(0x0f), emit.BroadcastByte(0x30)
		return func(p reg.Register) func(blk int) reg.VecVirtual {
			quarter := emit.Q6KQuarters(p, m4, m30)
			return func(blk int) reg.VecVirtual { return quarter(blk/4, blk%4) }
		}
	},
}

// IQ2_XS: 74-byte blocks of 256: d f16 @0, qs uint16[32] @2 (9-bit grid
// index, 7-bit sign index per 8 values), 4-bit scales[8] @66 (one per 16
// values, byte b's low nibble the first 16 of activation block b, its high
// nibble the second): y = d·(2s+1)/8·grid·sign. table is [65536]uint64:
// for every qs word, its 8 signed levels (±8, ±25, ±43) as bytes, so one
// load per 8 values fetches grid and signs together.
//
// dotIQ2XS emits the kernel for rows activation rows (1 or 4): per block
// the scales are built once, and each 32 values' levels looked up and
// their magnitudes taken once for the rows.
func dotIQ2XS(rows int) {
	var p, q, d, n, qs, ds, q3, d3 reg.Register
	if rows == 1 {
		TEXT("dotIQ2XSQ8AVX2", NOSPLIT, "func(blk *byte, q *int8, d *float32, nblk int, table *uint64) float32")
		Doc("dotIQ2XSQ8AVX2 is Σ decode(blk)[i]·(d[i/32]·q[i]) over nblk iq2_xs blocks, in integers per 32 values.")
		p, q, d, n = Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64()), Load(Param("nblk"), GP64())
	} else {
		name := "dotIQ2XSQ8x4AVX2"
		TEXT(name, NOSPLIT, "func(blk *byte, q *int8, d *float32, qstride, dstride, nblk int, out *[4]float32, grid *uint64, signs *uint64)")
		Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk iq2_xs blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride bytes.")
		p, q, d = Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64())
		qs, ds, n = Load(Param("qstride"), GP64()), Load(Param("dstride"), GP64()), Load(Param("nblk"), GP64())
		q3, d3 = GP64(), GP64()
		LEAQ(Mem{Base: qs, Index: qs, Scale: 2}, q3)
		LEAQ(Mem{Base: ds, Index: ds, Scale: 2}, d3)
	}
	row := func(r, qdisp int) (Mem, Mem) {
		if rows == 1 {
			return Mem{Base: q, Disp: qdisp}, Mem{Base: d}
		}
		return act8Row4(q, d, qs, ds, q3, d3, r, qdisp, 0)
	}
	// one row: table, the signed levels of every qs word (512 KiB); four
	// rows: grid (magnitudes per 9-bit index, 4 KiB) and signs (±1 bytes
	// per 7-bit sign index, 1 KiB), which stay in the first-level cache
	// beside the four rows' activations and the weights
	var table, grid, signs reg.Register
	if rows == 1 {
		table = Load(Param("table"), GP64())
	} else {
		grid, signs = Load(Param("grid"), GP64()), Load(Param("signs"), GP64())
	}
	sc := AllocLocal(16)        // the 16 (2s+1) as bytes
	fs := AllocLocal(32 * rows) // per row r: d_w/8·d_r[j] for the block's 8 activation blocks
	masks := iq2ScaleMasks()
	m4 := emit.BroadcastByte(0x0f)
	acc := emit.Zeroed(max(2, rows))
	accOf := func(r, blk int) reg.VecVirtual {
		if rows == 1 {
			return acc[blk&1]
		}
		return acc[r]
	}
	emit.Loop(fmt.Sprintf("iq2_%d", rows), n, func() {
		prefetchLines(p, 74)
		// scales: bytes b → (2·lo+1, 2·hi+1) interleaved.
		b, lo, hi := XMM(), XMM(), XMM()
		VMOVQ(Mem{Base: p, Disp: 66}, b)
		VPAND(m4.AsX(), b, lo)
		VPSRLW(U8(4), b, hi)
		VPAND(m4.AsX(), hi, hi)
		VPUNPCKLBW(hi, lo, lo)
		VPADDB(lo, lo, lo)
		one := XMM()
		VPCMPEQB(one, one, one)
		VPSUBB(one, lo, lo) // +1
		VMOVDQU(lo, sc)
		sv := YMM()
		VBROADCASTI128(sc, sv)
		dw := emit.F16Scalar(Mem{Base: p})
		eighth := GP32()
		MOVL(U32(0x3e000000), eighth) // 0.125
		e := XMM()
		VMOVD(eighth, e)
		VMULSS(e, dw, dw)
		dwy := YMM()
		VBROADCASTSS(dw, dwy)
		for r := range rows {
			_, dm := row(r, 0)
			blockScales(dwy, dm, fs.Offset(32*r))
		}
		for blk := range 8 {
			if rows == 4 {
				iq2xsRows4(p, blk, grid, signs, masks, sv, row, fs, acc)
				continue
			}
			gl, gh := XMM(), XMM()
			for k := range 4 {
				v := GP64()
				MOVWQZX(Mem{Base: p, Disp: 2 + 2*(4*blk+k)}, v)
				g := gl
				if k >= 2 {
					g = gh
				}
				if k%2 == 0 {
					VMOVQ(Mem{Base: table, Index: v, Scale: 8}, g)
				} else {
					VPINSRQ(U8(1), Mem{Base: table, Index: v, Scale: 8}, g, g)
				}
			}
			gy := YMM()
			VINSERTI128(U8(1), gh, gl.AsY(), gy)
			scy := YMM()
			VPSHUFB(masks.Offset(32*blk), sv, scy)
			a := YMM()
			qm, _ := row(0, 32*blk)
			VMOVDQU(qm, a)
			signedDot(gy, a)
			VPMADDWD(scy, gy, gy)
			scaleFMA(gy, fs.Offset(4*blk), accOf(0, blk))
		}
		ADDQ(U32(74), p)
		ADDQ(U32(256), q)
		ADDQ(U32(32), d)
	})
	if rows == 1 {
		emit.Hsum(acc...)
	} else {
		storeOut(acc)
	}
}

// iq2ScaleMasks are the VPSHUFB masks that spread scale bytes 2b (low 128
// bits) and 2b+1 (high) over 8 words each, zero-extended, for b < 8.
// Declared once, on the first kernel's call.
func iq2ScaleMasks() Mem {
	if iq2ScaleMasksSym != nil {
		return *iq2ScaleMasksSym
	}
	m := GLOBL("iq2ScaleMasks", RODATA|NOPTR)
	iq2ScaleMasksSym = &m
	for b := range 8 {
		for i := range 32 {
			v := uint8(0x80) // zero
			if i%2 == 0 {
				v = uint8(2 * b)
				if i >= 16 {
					v++
				}
			}
			DATA(32*b+i, U8(v))
		}
	}
	return m
}

var iq2ScaleMasksSym *Mem

// args32x4 are the loaded parameters of a four-row kernel of 32-value
// blocks: weights, row 0's levels and scales, the strides and their
// triples, the block count.
type args32x4 struct {
	p, q, d, qs, ds, q3, d3, n reg.Register
}

// load32x4 loads the four-row parameters blk, q, d, qstride, dstride and
// nblk.
func load32x4() args32x4 {
	var a args32x4
	a.p, a.q, a.d = Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64())
	a.qs, a.ds, a.n = Load(Param("qstride"), GP64()), Load(Param("dstride"), GP64()), Load(Param("nblk"), GP64())
	a.q3, a.d3 = GP64(), GP64()
	LEAQ(Mem{Base: a.qs, Index: a.qs, Scale: 2}, a.q3)
	LEAQ(Mem{Base: a.ds, Index: a.ds, Scale: 2}, a.d3)
	return a
}

// blocks32x4 emits the body of the four-row kernel of a format of
// 32-value blocks of size bytes with its f16 scale first (q8_0, iq4_nl):
// weights(k) is block k's (at p + k·size) 32 signed levels, looked up and
// their magnitudes taken once for the four rows. Eight blocks per
// iteration: their scales gathered and converted in one vector and
// multiplied by each row's eight activation scales at once (a scalar
// chain per block and row was a fifth of the instructions); the last
// nblk%8 blocks one at a time.
func blocks32x4(label string, a args32x4, size int, weights func(k int) reg.VecVirtual) {
	p, q, d, n := a.p, a.q, a.d, a.n
	ones := onesW()
	fs := AllocLocal(4 * 32) // per row r: d_w·d_r of the eight blocks
	acc := emit.Zeroed(4)
	// rowDot is block k's levels w (magnitudes aw) · row r's levels.
	rowDot := func(w, aw reg.VecVirtual, r, k int) reg.VecVirtual {
		qm, _ := act8Row4(q, d, a.qs, a.ds, a.q3, a.d3, r, 32*k, 0)
		x := YMM()
		VMOVDQU(qm, x)
		VPSIGNB(w, x, x)
		VPMADDUBSW(x, aw, x)
		VPMADDWD(ones, x, x)
		return x
	}
	signed := func(k int) (reg.VecVirtual, reg.VecVirtual) {
		w := weights(k)
		aw := YMM()
		VPSIGNB(w, w, aw)
		return w, aw
	}
	groups := GP64()
	MOVQ(n, groups)
	SHRQ(U8(3), groups)
	emit.Loop(label, groups, func() {
		prefetchLines(p, 8*size)
		h := XMM()
		VPXOR(h, h, h)
		for k := range 8 {
			VPINSRW(U8(k), Mem{Base: p, Disp: size * k}, h, h)
		}
		dw := YMM()
		VCVTPH2PS(h, dw)
		for r := range 4 {
			_, dm := act8Row4(q, d, a.qs, a.ds, a.q3, a.d3, r, 0, 0)
			blockScales(dw, dm, fs.Offset(32*r))
		}
		for k := range 8 {
			w, aw := signed(k)
			for r := range 4 {
				scaleFMA(rowDot(w, aw, r, k), fs.Offset(32*r+4*k), acc[r])
			}
		}
		ADDQ(U32(uint32(8*size)), p)
		ADDQ(U32(256), q)
		ADDQ(U32(32), d)
	})
	ANDQ(U32(7), n)
	emit.Loop(label+"_tail", n, func() {
		w, aw := signed(0)
		dw := emit.F16Scalar(Mem{Base: p})
		for r := range 4 {
			x := rowDot(w, aw, r, 0)
			VCVTDQ2PS(x, x)
			_, dm := act8Row4(q, d, a.qs, a.ds, a.q3, a.d3, r, 0, 0)
			s := XMM()
			VMULSS(dm, dw, s)
			sy := YMM()
			VBROADCASTSS(s, sy)
			VFMADD231PS(sy, x, acc[r])
		}
		ADDQ(U32(uint32(size)), p)
		ADDQ(U32(32), q)
		ADDQ(U32(4), d)
	})
	storeOut(acc)
}

// dotQ8_0x4: dotQ8_0 for four activation rows (blocks32x4): each block's
// levels loaded and their magnitudes taken once for the four.
func dotQ8_0x4() {
	name := "dotQ8_0Q8x4AVX2"
	TEXT(name, NOSPLIT, "func(blk *byte, q *int8, d *float32, qstride, dstride, nblk int, out *[4]float32)")
	Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk q8_0 blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride bytes.")
	a := load32x4()
	blocks32x4("q8x4", a, 34, func(k int) reg.VecVirtual {
		w := YMM()
		VMOVDQU(Mem{Base: a.p, Disp: 34*k + 2}, w)
		return w
	})
}

// iq2xsRows4 is dotIQ2XS's activation block blk for four rows: the 32
// magnitudes from grid and the signs (±1 bytes) from signs, four qs words
// each; the signs go onto the activations (VPSIGNB), the magnitudes are
// VPMADDUBSW's unsigned side as they are.
func iq2xsRows4(p reg.Register, blk int, grid, signs reg.Register, masks Mem, sv reg.VecVirtual,
	row func(r, qdisp int) (Mem, Mem), fs Mem, acc []reg.VecVirtual) {
	var g, sg [2]reg.VecVirtual
	for h := range 2 {
		g[h], sg[h] = XMM(), XMM()
		for k := range 2 {
			v, gi := GP64(), GP64()
			MOVWQZX(Mem{Base: p, Disp: 2 + 2*(4*blk+2*h+k)}, v)
			MOVL(v.As32(), gi.As32())
			ANDL(U32(511), gi.As32())
			SHRL(U8(9), v.As32())
			if k == 0 {
				VMOVQ(Mem{Base: grid, Index: gi, Scale: 8}, g[h])
				VMOVQ(Mem{Base: signs, Index: v, Scale: 8}, sg[h])
			} else {
				VPINSRQ(U8(1), Mem{Base: grid, Index: gi, Scale: 8}, g[h], g[h])
				VPINSRQ(U8(1), Mem{Base: signs, Index: v, Scale: 8}, sg[h], sg[h])
			}
		}
	}
	gy, sy := YMM(), YMM()
	VINSERTI128(U8(1), g[1], g[0].AsY(), gy)
	VINSERTI128(U8(1), sg[1], sg[0].AsY(), sy)
	sc := YMM()
	VPSHUFB(masks.Offset(32*blk), sv, sc)
	for r := range 4 {
		qm, _ := row(r, 32*blk)
		a := YMM()
		VMOVDQU(qm, a)
		VPSIGNB(sy, a, a)
		VPMADDUBSW(a, gy, a)
		VPMADDWD(sc, a, a)
		scaleFMA(a, fs.Offset(32*r+4*blk), acc[r])
	}
}
