package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/strata-llm/strata/models/quant/asm/emit"
)

// legacy is one of ggml's 32-value formats q4_0 … q5_1: d f16 @0, then m
// f16 (q4_1, q5_1), qh u32 (q5_0, q5_1: bit j the fifth bit of value j)
// and qs[16] (byte j: value j in its low nibble, j+16 in its high one).
// y = d·u + m, or d·(u − bias) for the symmetric ones: either way an
// unsigned level u whose offset (m, or −bias·d) meets the activation
// block's sum (Act8.S), eight blocks' offsets in one vector.
type legacy struct {
	name, desc        string
	size, minAt, qhAt int // minAt, qhAt −1: none
	qsAt              int
	bias              int // subtracted from u where there is no m
}

var (
	legacySig   = "func(" + fmt.Sprintf(rowsParams, "s") + ") float32"
	legacyx4Sig = "func(blk *byte, q *int8, d *float32, s *float32, qstride, dstride, nblk int, out *[4]float32)"
)

var (
	q4_0 = legacy{name: "Q4_0", desc: "q4_0", size: 18, minAt: -1, qhAt: -1, qsAt: 2, bias: 8}
	q4_1 = legacy{name: "Q4_1", desc: "q4_1", size: 20, minAt: 2, qhAt: -1, qsAt: 4}
	q5_0 = legacy{name: "Q5_0", desc: "q5_0", size: 22, minAt: -1, qhAt: 2, qsAt: 6, bias: 16}
	q5_1 = legacy{name: "Q5_1", desc: "q5_1", size: 24, minAt: 2, qhAt: 4, qsAt: 8}
)

// legacyConsts: the VPSHUFB mask that spreads byte i/8 of a dword to byte
// i, the bytes ^(1 << i%8) (OR then all-ones where bit i%8 is set), and
// the float32 biases −8, −16.
func legacyConsts() Mem {
	if legacyConstsSym != nil {
		return *legacyConstsSym
	}
	m := GLOBL("legacyConsts", RODATA|NOPTR)
	legacyConstsSym = &m
	for i := range 32 {
		DATA(i, U8(uint8(i/8)))
	}
	for i := range 32 {
		DATA(32+i, U8(^uint8(1<<(i%8))))
	}
	DATA(64, U32(math.Float32bits(-8))) // avo writes F32(-8) as the integer $(-8)
	DATA(68, U32(math.Float32bits(-16)))
	return m
}

var legacyConstsSym *Mem

// dotLegacy emits f's integer dot for rows activation rows (1 or 4):
// eight blocks per iteration, their d (and m) gathered and converted in
// one vector, then the last nblk%8 blocks one at a time.
func dotLegacy(f legacy, rows int) {
	a := sumsPrologue(f.name, f.desc, rows, legacySig, legacyx4Sig, "s",
		"s[j] being d[j]·Σ q of block j; in integers per block.", "s_r = s + r·dstride bytes.")
	p, q, d, s, qs, ds, q3, d3, n := a.p, a.q, a.d, a.sums, a.qs, a.ds, a.q3, a.d3, a.n
	row := func(r, qdisp, ddisp int) (Mem, Mem, Mem) {
		if rows == 1 {
			return Mem{Base: q, Disp: qdisp}, Mem{Base: d, Disp: ddisp}, Mem{Base: s, Disp: ddisp}
		}
		qm, dm := act8Row4(q, d, qs, ds, q3, d3, r, qdisp, ddisp)
		_, sm := act8Row4(q, s, qs, ds, q3, d3, r, qdisp, ddisp)
		return qm, dm, sm
	}
	cs := legacyConsts()
	m4 := emit.BroadcastByte(0x0f)
	var c16 reg.VecVirtual
	if f.qhAt >= 0 {
		c16 = emit.BroadcastByte(0x10)
	}
	ones := onesW()
	fs := AllocLocal(32 * rows) // per row r: d_w·d_r of the eight blocks
	a.beginRow()
	nacc := 2
	if rows == 4 {
		nacc = 4
	}
	acc := emit.Zeroed(nacc)
	accOf := func(r, k int) reg.VecVirtual {
		if rows == 1 {
			return acc[k&1]
		}
		return acc[r]
	}
	// levels are block k's (at p + k·size) 32 unsigned levels
	levels := func(k int) reg.VecVirtual {
		lo, hi := XMM(), XMM()
		VMOVDQU(Mem{Base: p, Disp: f.size*k + f.qsAt}, lo)
		VPSRLW(U8(4), lo, hi)
		u := YMM()
		VINSERTI128(U8(1), hi, lo.AsY(), u)
		VPAND(m4, u, u)
		if f.qhAt >= 0 {
			b := YMM()
			VPBROADCASTD(Mem{Base: p, Disp: f.size*k + f.qhAt}, b)
			VPSHUFB(cs, b, b)
			VPOR(cs.Offset(32), b, b)
			all := YMM()
			VPCMPEQB(all, all, all)
			VPCMPEQB(all, b, b)
			VPAND(c16, b, b)
			VPOR(b, u, u)
		}
		return u
	}
	// blockDots adds block k's integer dots with every row, times fs
	// (row r's at fs + 32r + 4·fk), into the accumulators.
	blockDots := func(k, fk int) {
		u := levels(k)
		for r := range rows {
			qm, _, _ := row(r, 32*k, 0)
			a := YMM()
			VPMADDUBSW(qm, u, a)
			VPMADDWD(ones, a, a)
			scaleFMA(a, fs.Offset(32*r+4*fk), accOf(r, k))
		}
	}
	// gather is the eight blocks' f16 at disp as float32 lanes.
	gather := func(disp int) reg.VecVirtual {
		h := XMM()
		VPXOR(h, h, h)
		for k := range 8 {
			VPINSRW(U8(k), Mem{Base: p, Disp: f.size*k + disp}, h, h)
		}
		v := YMM()
		VCVTPH2PS(h, v)
		return v
	}
	groups := GP64()
	MOVQ(n, groups)
	SHRQ(U8(3), groups)
	label := fmt.Sprintf("%s_%d", f.name, rows)
	emit.Loop(label, groups, func() {
		prefetchLines(p, 8*f.size)
		dw := gather(0)
		off := dw // the offsets' factor of each block's sum: m, or −bias·d
		if f.minAt >= 0 {
			off = gather(f.minAt)
		} else {
			off = YMM()
			VBROADCASTSS(f.biasConst(cs), off)
			VMULPS(dw, off, off)
		}
		for r := range rows {
			_, dm, sm := row(r, 0, 0)
			VFMADD231PS(sm, off, accOf(r, 1))
			blockScales(dw, dm, fs.Offset(32*r))
		}
		for k := range 8 {
			blockDots(k, k)
		}
		ADDQ(U32(uint32(8*f.size)), p)
		ADDQ(U32(256), q)
		ADDQ(U32(32), d)
		ADDQ(U32(32), s)
	})
	ANDQ(U32(7), n)
	emit.Loop(label+"_tail", n, func() {
		dw := emit.F16Scalar(Mem{Base: p})
		off := XMM() // its upper lanes zero, as dw's: it adds one lane to an accumulator
		if f.minAt >= 0 {
			off = emit.F16Scalar(Mem{Base: p, Disp: f.minAt})
		} else {
			VMULSS(f.biasConst(cs), dw, off)
		}
		for r := range rows {
			_, dm, sm := row(r, 0, 0)
			t := XMM()
			VMULSS(sm, off, t)
			VADDPS(t.AsY(), accOf(r, 0), accOf(r, 0))
			VMULSS(dm, dw, t)
			VMOVSS(t, fs.Offset(32*r))
		}
		blockDots(0, 0)
		ADDQ(U32(uint32(f.size)), p)
		ADDQ(U32(32), q)
		ADDQ(U32(4), d)
		ADDQ(U32(4), s)
	})
	a.endRow(acc)
}

// biasConst is the float32 −bias in legacyConsts.
func (f legacy) biasConst(cs Mem) Mem {
	if f.bias == 16 {
		return cs.Offset(68)
	}
	return cs.Offset(64)
}
