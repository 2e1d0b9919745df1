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

// args32 are the loaded parameters of a two-, four- or eight-row kernel of
// 32-value blocks: weights, row 0's levels and scales, the strides, the
// block count and the rows' addressing.
type args32 struct {
	p, q, d, n reg.Register
	rows       rowSet
}

// load32 loads the multi-row parameters blk, q, d, qstride, dstride and
// nblk for rows (2, 4 or 8) activation rows.
func load32(rows int) args32 {
	var a args32
	a.p, a.q, a.d = Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64())
	qs, ds := Load(Param("qstride"), GP64()), Load(Param("dstride"), GP64())
	a.n = Load(Param("nblk"), GP64())
	a.rows = newRowSet(rows, a.q, qs, ds)
	return a
}

// blocks32 emits the body of the two-, four- or eight-row kernel of a format of
// 32-value blocks of size bytes with its f16 scale first (q8_0, iq4_nl):
// weights(k) is block k's (at p + k·size) 32 signed levels, looked up and
// their magnitudes taken once for the rows. Eight blocks per iteration:
// their scales gathered and converted in one vector and multiplied by
// each row's eight activation scales at once (a scalar chain per block
// and row was a fifth of the instructions); the last nblk%8 blocks one at
// a time.
func blocks32(label string, a args32, size int, weights func(k int) reg.VecVirtual) {
	p, q, d, n, rs := a.p, a.q, a.d, a.n, a.rows
	ones := onesW()
	fs := AllocLocal(32 * rs.rows) // per row r: d_w·d_r of the eight blocks
	acc := emit.Zeroed(rs.rows)
	// rowDot is block k's levels w (magnitudes aw) · row r's levels.
	rowDot := func(w, aw reg.VecVirtual, r, k int) reg.VecVirtual {
		x := YMM()
		VMOVDQU(rs.level(r, 32*k), x)
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
		rs.each([]rowArray{{d, 1}}, func(r int, m []Mem) {
			blockScales(dw, m[0], fs.Offset(32*r))
		})
		for k := range 8 {
			w, aw := signed(k)
			for r := range rs.rows {
				scaleFMA(rowDot(w, aw, r, k), fs.Offset(32*r+4*k), acc[r])
			}
		}
		ADDQ(U32(uint32(8*size)), p)
		ADDQ(U32(256), q)
		rs.advance(256)
		ADDQ(U32(32), d)
	})
	ANDQ(U32(7), n)
	emit.Loop(label+"_tail", n, func() {
		w, aw := signed(0)
		dw := emit.F16Scalar(Mem{Base: p})
		rs.each([]rowArray{{d, 1}}, func(r int, m []Mem) {
			x := rowDot(w, aw, r, 0)
			VCVTDQ2PS(x, x)
			s := XMM()
			VMULSS(m[0], dw, s)
			sy := YMM()
			VBROADCASTSS(s, sy)
			VFMADD231PS(sy, x, acc[r])
		})
		ADDQ(U32(uint32(size)), p)
		ADDQ(U32(32), q)
		rs.advance(32)
		ADDQ(U32(4), d)
	})
	storeOut(acc)
}

// dotQ8_0xN: dotQ8_0 for two, four or eight activation rows (blocks32): each
// block's levels loaded and their magnitudes taken once for the rows.
func dotQ8_0xN(rows int) {
	name := fmt.Sprintf("dotQ8_0Q8x%dAVX2", rows)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(blk *byte, q *int8, d *float32, qstride, dstride, nblk int, out *[%d]float32)", rows))
	Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk q8_0 blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride bytes.")
	a := load32(rows)
	blocks32(fmt.Sprintf("q8x%d", rows), a, 34, func(k int) reg.VecVirtual {
		w := YMM()
		VMOVDQU(Mem{Base: a.p, Disp: 34*k + 2}, w)
		return w
	})
}

// rowSet addresses the activation rows of a two-, four- or eight-row kernel:
// row r's levels at q + r·qs (rows 4-7 from q4 = q + 4·qs, which the
// kernel advances beside q), its per-block arrays (scales, sums) at r·ds
// (or 2r·ds: the sums per 16) from row 0's.
type rowSet struct {
	rows              int
	q, qs, ds, q3, d3 reg.Register
	q4                reg.Register // eight rows only
}

// newRowSet sets up the addressing of rows rows (2, 4 or 8) from row 0's
// levels at q: the triple strides (four rows: 3·ds too, for the per-block
// arrays), and q4.
func newRowSet(rows int, q, qs, ds reg.Register) rowSet {
	s := rowSet{rows: rows, q: q, qs: qs, ds: ds}
	if rows == 2 {
		return s
	}
	s.q3 = GP64()
	LEAQ(Mem{Base: qs, Index: qs, Scale: 2}, s.q3)
	if rows == 4 {
		s.d3 = GP64()
		LEAQ(Mem{Base: ds, Index: ds, Scale: 2}, s.d3)
	} else {
		s.q4 = GP64()
		LEAQ(Mem{Base: q, Index: qs, Scale: 4}, s.q4)
	}
	return s
}

// level is row r's activation levels at byte disp.
func (s rowSet) level(r, disp int) Mem {
	base := s.q
	if r >= 4 {
		base, r = s.q4, r-4
	}
	m, _ := act8Row4(base, base, s.qs, s.qs, s.q3, s.q3, r, disp, 0)
	return m
}

// advance moves q4 on with q by n bytes (eight rows).
func (s rowSet) advance(n int) {
	if s.q4 != nil {
		ADDQ(U32(uint32(n)), s.q4)
	}
}

// rowArray is a per-block array of the activation rows: row 0's at base,
// row r's r·mul strides on.
type rowArray struct {
	base reg.Register
	mul  int
}

// each emits body for every row r with its element of each array (at
// their current bases): two or four rows as indexed operands, eight through
// copies of the bases stepped by the stride from row to row.
func (s rowSet) each(arrays []rowArray, body func(r int, m []Mem)) {
	m := make([]Mem, len(arrays))
	if s.rows <= 4 {
		for r := range s.rows {
			for i, a := range arrays {
				m[i] = s.row4(a, r)
			}
			body(r, m)
		}
		return
	}
	cur := make([]reg.Register, len(arrays))
	for i, a := range arrays {
		c := GP64()
		MOVQ(a.base, c)
		cur[i] = c
		m[i] = Mem{Base: c}
	}
	for r := range s.rows {
		body(r, m)
		if r == s.rows-1 {
			break
		}
		for i, a := range arrays {
			for range a.mul {
				ADDQ(s.ds, cur[i])
			}
		}
	}
}

// row4 is row r's element of a (two or four rows).
func (s rowSet) row4(a rowArray, r int) Mem {
	if a.mul == 1 {
		_, m := act8Row4(a.base, a.base, s.ds, s.ds, s.d3, s.d3, r, 0, 0)
		return m
	}
	switch r {
	case 1:
		return Mem{Base: a.base, Index: s.ds, Scale: 2}
	case 2:
		return Mem{Base: a.base, Index: s.ds, Scale: 4}
	case 3:
		return Mem{Base: a.base, Index: s.d3, Scale: 2}
	}
	return Mem{Base: a.base}
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
