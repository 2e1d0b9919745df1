package main

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// quantizeAct8 emits quant.quantizeAct8Block for one whole block of 32
// finite values, not all zero, with the same float32 operations in the
// same order (so the same bits): amax the largest |x| (as float32 bits:
// for finite values they order as the values), d = amax/127, id = 127/amax,
// levels trunc(x·id ± 0.5) (halves away from zero, ggml's roundf) within
// ±127, and the sums d·Σq per block and per 16 (and Σq per 16 as int16). It returns false, storing
// nothing, where amax is not finite or below 2^-119 (zero, or so small
// that 127/amax nears overflow): the Go code's special cases, and the
// Go conversion of an infinite x·id, left to the Go code.
func quantizeAct8() { quantizeAct8With(false) }

// quantizeAct8Max emits quantizeAct8 with the largest |x| given (as
// float32 bits: the max over the block's 256 values, Quantize256) rather
// than found.
func quantizeAct8Max() { quantizeAct8With(true) }

func quantizeAct8With(given bool) {
	name, sig := "quantizeAct8AVX2", "func(x *float32, q *int8, d, s, h *float32, g16 *int16) bool"
	if given {
		name, sig = "quantizeAct8MaxAVX2", "func(x *float32, q *int8, d, s, h *float32, g16 *int16, amax uint32) bool"
	}
	TEXT(name, NOSPLIT, sig)
	if given {
		Doc(name + " quantizes the 32 values at x as quantizeAct8BlockMax does with amax their scale's max|x| (float32 bits); false (nothing stored) where amax is 0 or not finite.")
	} else {
		Doc(name + " quantizes the 32 values at x as quantizeAct8Block does; false (nothing stored) where max|x| is 0 or not finite.")
	}
	xp, qp := Load(Param("x"), GP64()), Load(Param("q"), GP64())
	c := quantizeConsts()
	var v [4]reg.VecVirtual
	var mx reg.Register
	bits := GP32()
	if given {
		for i := range v {
			v[i] = YMM()
			VMOVUPS(Mem{Base: xp, Disp: 32 * i}, v[i])
		}
		Load(Param("amax"), bits)
		mx = XMM()
		VMOVD(bits, mx)
	} else {
		abs := YMM()
		VBROADCASTSS(c, abs) // 0x7fffffff
		m := YMM()
		for i := range v {
			v[i] = YMM()
			VMOVUPS(Mem{Base: xp, Disp: 32 * i}, v[i])
			if i == 0 {
				VANDPS(abs, v[i], m)
				continue
			}
			t := YMM()
			VANDPS(abs, v[i], t)
			VPMAXUD(t, m, m)
		}
		hi := XMM()
		VEXTRACTI128(U8(1), m, hi)
		mx = m.AsX()
		VPMAXUD(hi, mx, mx)
		VPSHUFD(U8(0x4e), mx, hi)
		VPMAXUD(hi, mx, mx)
		VPSHUFD(U8(0xb1), mx, hi)
		VPMAXUD(hi, mx, mx)
		VMOVD(mx, bits)
	}
	CMPL(bits, U32(0x04000000)) // below 2^-119 (zero, or 127/amax near overflow)
	JB(LabelRef(name + "_special"))
	CMPL(bits, U32(0x7f800000))
	JAE(LabelRef(name + "_special"))
	// d = amax/127, id = 127/amax
	c127 := XMM()
	VMOVSS(c.Offset(4), c127)
	dd, id := XMM(), XMM()
	VDIVSS(c127, mx, dd)
	VDIVSS(mx, c127, id)
	idy, half, sign := YMM(), YMM(), YMM()
	VBROADCASTSS(id, idy)
	VBROADCASTSS(c.Offset(8), half) // 0.5
	VBROADCASTSS(c.Offset(12), sign)
	lim, nlim := YMM(), YMM()
	VPBROADCASTD(c.Offset(16), lim) // 127
	VPBROADCASTD(c.Offset(20), nlim)
	for i := range v {
		f := v[i]
		VMULPS(idy, f, f)
		hs := YMM()
		VANDPS(sign, f, hs)
		VORPS(half, hs, hs) // ±0.5 with f's sign
		VADDPS(hs, f, f)
		VCVTTPS2DQ(f, f)
		VPMINSD(lim, f, f)
		VPMAXSD(nlim, f, f)
	}
	// sums per 16 (values 0-15: v0, v1; 16-31: v2, v3)
	s0, s1 := YMM(), YMM()
	VPADDD(v[1], v[0], s0)
	VPADDD(v[3], v[2], s1)
	sums := [2]reg.VecVirtual{s0, s1}
	for _, s := range sums {
		h := XMM()
		VEXTRACTI128(U8(1), s, h)
		VPADDD(h, s.AsX(), s.AsX())
		VPSHUFD(U8(0x4e), s.AsX(), h)
		VPADDD(h, s.AsX(), s.AsX())
		VPSHUFD(U8(0xb1), s.AsX(), h)
		VPADDD(h, s.AsX(), s.AsX())
	}
	// the levels as bytes, in order: pack to words (lanes interleave
	// 128-bit halves), then bytes, then put the dwords back in order
	VPACKSSDW(v[1], v[0], v[0])
	VPACKSSDW(v[3], v[2], v[2])
	VPACKSSWB(v[2], v[0], v[0])
	perm := YMM()
	VMOVDQU(c.Offset(32), perm)
	VPERMD(v[0], perm, v[0])
	VMOVDQU(v[0], Mem{Base: qp})
	dp, sp, hp := Load(Param("d"), GP64()), Load(Param("s"), GP64()), Load(Param("h"), GP64())
	VMOVSS(dd, Mem{Base: dp})
	tot := XMM()
	VPADDD(s1.AsX(), s0.AsX(), tot)
	VCVTDQ2PS(tot, tot)
	VMULSS(dd, tot, tot)
	VMOVSS(tot, Mem{Base: sp})
	gp := Load(Param("g16"), GP64())
	for i, s := range sums {
		gi := GP32()
		VMOVD(s.AsX(), gi)
		MOVW(gi.As16(), Mem{Base: gp, Disp: 2 * i})
		VCVTDQ2PS(s.AsX(), s.AsX())
		VMULSS(dd, s.AsX(), s.AsX())
		VMOVSS(s.AsX(), Mem{Base: hp, Disp: 4 * i})
	}
	VZEROUPPER()
	ok := GP8()
	MOVB(U8(1), ok)
	Store(ok, ReturnIndex(0))
	RET()
	Label(name + "_special")
	VZEROUPPER()
	no := GP8()
	MOVB(U8(0), no)
	Store(no, ReturnIndex(0))
	RET()
}

// absMax256 emits absMax256AVX2: the largest |x| of the 256 values at x
// as float32 bits (for finite values and +Inf they order as the values;
// any NaN gives bits above +Inf's).
func absMax256() {
	name := "absMax256AVX2"
	TEXT(name, NOSPLIT, "func(x *float32) uint32")
	Doc(name + " is the largest |x[i]|, i < 256, as float32 bits (a NaN gives bits above +Inf's).")
	xp := Load(Param("x"), GP64())
	c := quantizeConsts()
	abs := YMM()
	VBROADCASTSS(c, abs) // 0x7fffffff
	m := [4]reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for i := range 32 {
		if i < 4 {
			VANDPS(Mem{Base: xp, Disp: 32 * i}, abs, m[i])
			continue
		}
		t := YMM()
		VANDPS(Mem{Base: xp, Disp: 32 * i}, abs, t)
		VPMAXUD(t, m[i%4], m[i%4])
	}
	VPMAXUD(m[1], m[0], m[0])
	VPMAXUD(m[3], m[2], m[2])
	VPMAXUD(m[2], m[0], m[0])
	hi := XMM()
	VEXTRACTI128(U8(1), m[0], hi)
	mx := m[0].AsX()
	VPMAXUD(hi, mx, mx)
	VPSHUFD(U8(0x4e), mx, hi)
	VPMAXUD(hi, mx, mx)
	VPSHUFD(U8(0xb1), mx, hi)
	VPMAXUD(hi, mx, mx)
	bits := GP32()
	VMOVD(mx, bits)
	VZEROUPPER()
	Store(bits, ReturnIndex(0))
	RET()
}

var quantConsts *Mem

// quantizeConsts: |x| mask, 127.0, 0.5, the sign bit, int32 127 and −127,
// then (at 32) the VPERMD order that undoes the packs' lane interleaving.
func quantizeConsts() Mem {
	if quantConsts != nil {
		return *quantConsts
	}
	m := GLOBL("act8QuantConsts", RODATA|NOPTR)
	quantConsts = &m
	DATA(0, U32(0x7fffffff))
	DATA(4, U32(0x42fe0000)) // 127.0
	DATA(8, U32(0x3f000000)) // 0.5
	DATA(12, U32(0x80000000))
	DATA(16, U32(127))
	DATA(20, U32(0xffffff81)) // −127
	for i, o := range []uint32{0, 4, 1, 5, 2, 6, 3, 7} {
		DATA(32+4*i, U32(o))
	}
	return m
}
