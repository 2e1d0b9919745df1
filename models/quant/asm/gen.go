// Command asm generates models/quant's amd64 AVX2+FMA dot-product kernels
// (dot_amd64.s and their declarations in dot_amd64_decl.go) with avo.
//
// Every kernel multiplies stored blocks with float32 activations in place,
// accumulating in float32 (several vector accumulators, summed at the end):
// the result equals the pure-Go reference (Format.Dot, float64) up to float32
// reassociation. Run through `go generate ./models/quant`.
package main

import (
	"fmt"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/strata-llm/strata/models/quant/asm/emit"
)

func main() {
	ConstraintExpr("amd64")
	dotF32()
	dotHalf("dotF16AVX2", true)
	dotHalf("dotBF16AVX2", false)
	dotQ8_0()
	dotQ4K()
	dotQ6K()
	dotIQ2XS()
	dotQ8_0x4()
	dotQ4Kx4()
	dotQ6Kx4()
	dotIQ2XSx4()
	dotHalfx4("dotF16x4AVX2", true)
	dotHalfx4("dotBF16x4AVX2", false)
	Generate()
}

func dotF32() {
	TEXT("dotF32AVX2", NOSPLIT, "func(a, b *float32, n int) float32")
	Doc("dotF32AVX2 is Σ a[i]·b[i] over n elements, n a multiple of 32.")
	a, b, n := Load(Param("a"), GP64()), Load(Param("b"), GP64()), Load(Param("n"), GP64())
	SHRQ(U8(5), n)
	acc := emit.Zeroed(4)
	emit.Loop("f32", n, func() {
		for k := range 4 {
			t := YMM()
			VMOVUPS(Mem{Base: a, Disp: 32 * k}, t)
			VFMADD231PS(Mem{Base: b, Disp: 32 * k}, t, acc[k])
		}
		ADDQ(U32(128), a)
		ADDQ(U32(128), b)
	})
	emit.Hsum(acc...)
}

// dotHalf: f16 (VCVTPH2PS) or bf16 (the bits shifted into a float32's top half).
func dotHalf(name string, f16 bool) {
	TEXT(name, NOSPLIT, "func(w *byte, x *float32, n int) float32")
	Doc(fmt.Sprintf("%s is Σ w[i]·x[i] over n elements stored as %s, n a multiple of 32.", name, map[bool]string{true: "f16", false: "bf16"}[f16]))
	w, x, n := Load(Param("w"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	SHRQ(U8(5), n)
	acc := emit.Zeroed(4)
	emit.Loop(name, n, func() {
		for k := range 4 {
			t := YMM()
			if f16 {
				VCVTPH2PS(Mem{Base: w, Disp: 16 * k}, t)
			} else {
				VPMOVZXWD(Mem{Base: w, Disp: 16 * k}, t)
				VPSLLD(U8(16), t, t)
			}
			VFMADD231PS(Mem{Base: x, Disp: 32 * k}, t, acc[k])
		}
		ADDQ(U32(64), w)
		ADDQ(U32(128), x)
	})
	emit.Hsum(acc...)
}

// Q8_0: 34-byte blocks of 32, d f16 @0, qs int8[32] @2.
func dotQ8_0() {
	TEXT("dotQ8_0AVX2", NOSPLIT, "func(blk *byte, x *float32, nblk int) float32")
	Doc("dotQ8_0AVX2 is Σ decode(blk)[i]·x[i] over nblk q8_0 blocks.")
	p, x, n := Load(Param("blk"), GP64()), Load(Param("x"), GP64()), Load(Param("nblk"), GP64())
	acc := emit.Zeroed(4)
	emit.Loop("q8", n, func() {
		d := emit.BroadcastF16(Mem{Base: p})
		for k := range 4 {
			q := YMM()
			VPMOVSXBD(Mem{Base: p, Disp: 2 + 8*k}, q)
			VCVTDQ2PS(q, q)
			VMULPS(d, q, q)
			VFMADD231PS(Mem{Base: x, Disp: 32 * k}, q, acc[k])
		}
		ADDQ(U32(34), p)
		ADDQ(U32(128), x)
	})
	emit.Hsum(acc...)
}

// scaleVec converts the 8 bytes at the low end of v (signed or not) to
// float32, times d, into the local slot.
func scaleVec(src Op, signed bool, d reg.VecVirtual, dst Mem) {
	t := YMM()
	if signed {
		VPMOVSXBD(src, t)
	} else {
		VPMOVZXBD(src, t)
	}
	VCVTDQ2PS(t, t)
	VMULPS(d, t, t)
	VMOVUPS(t, dst)
}

// Q4_K: 144-byte blocks of 256: d f16 @0, dmin f16 @2, 12 bytes of 6-bit
// scales and mins @4, qs[128] @16; 8 sub-blocks of 32: y = d·sc·q − dmin·m,
// sub-block 2c the low nibbles of qs[32c:32c+32], 2c+1 their high nibbles.
func dotQ4K() {
	TEXT("dotQ4KAVX2", NOSPLIT, "func(blk *byte, x *float32, nblk int) float32")
	Doc("dotQ4KAVX2 is Σ decode(blk)[i]·x[i] over nblk q4_K blocks.")
	p, x, n := Load(Param("blk"), GP64()), Load(Param("x"), GP64()), Load(Param("nblk"), GP64())
	sc := AllocLocal(64) // 8 scales·d, 8 mins·dmin
	qb := AllocLocal(64) // one 64-value chunk's levels
	acc := emit.Zeroed(4)
	m4 := emit.BroadcastByte(0x0f)
	emit.Loop("q4k", n, func() {
		q4kScales(p, sc)
		for c := range 4 {
			q, h := YMM(), YMM()
			VMOVDQU(Mem{Base: p, Disp: 16 + 32*c}, q)
			VPSRLW(U8(4), q, h)
			VPAND(m4, q, q)
			VPAND(m4, h, h)
			VMOVDQU(q, qb)
			VMOVDQU(h, qb.Offset(32))
			for half := range 2 {
				j := 2*c + half
				xo := 4 * 32 * j
				qx, sx := YMM(), YMM()
				for k := range 4 {
					v := YMM()
					VPMOVZXBD(qb.Offset(32*half+8*k), v)
					VCVTDQ2PS(v, v)
					if k == 0 {
						VMULPS(Mem{Base: x, Disp: xo}, v, qx)
						VMOVUPS(Mem{Base: x, Disp: xo}, sx)
					} else {
						VFMADD231PS(Mem{Base: x, Disp: xo + 32*k}, v, qx)
						VADDPS(Mem{Base: x, Disp: xo + 32*k}, sx, sx)
					}
				}
				s, m := YMM(), YMM()
				VBROADCASTSS(sc.Offset(4*j), s)
				VBROADCASTSS(sc.Offset(32+4*j), m)
				VFMADD231PS(s, qx, acc[half])
				VFNMADD231PS(m, sx, acc[2+half])
			}
		}
		ADDQ(U32(144), p)
		ADDQ(U32(1024), x)
	})
	emit.Hsum(acc...)
}

// q4kScales writes the q4_K block at p's 8 scales·d and 8 mins·dmin as
// float32 into sc[0:32] and sc[32:64].
func q4kScales(p reg.Register, sc Mem) {
	// Scales and mins of sub-blocks 0-3 are the low 6 bits of bytes
	// 0-3 and 4-7; those of 4-7 take their low 4 bits from the nibbles
	// of bytes 8-11 and their high 2 bits from the top of bytes 0-7.
	w0, w1, w2 := GP64(), GP64(), GP64()
	MOVL(Mem{Base: p, Disp: 4}, w0.As32())
	MOVL(Mem{Base: p, Disp: 8}, w1.As32())
	MOVL(Mem{Base: p, Disp: 12}, w2.As32())
	lo, hi, t := GP64(), GP64(), GP64()
	// scales: lo = w0 & 0x3f3f3f3f, hi = (w2 & 0x0f0f0f0f) | ((w0>>6) & 0x03030303) << 4
	MOVL(w0.As32(), lo.As32())
	ANDL(U32(0x3f3f3f3f), lo.As32())
	MOVL(w2.As32(), hi.As32())
	ANDL(U32(0x0f0f0f0f), hi.As32())
	MOVL(w0.As32(), t.As32())
	SHRL(U8(6), t.As32())
	ANDL(U32(0x03030303), t.As32())
	SHLL(U8(4), t.As32())
	ORL(t.As32(), hi.As32())
	SHLQ(U8(32), hi)
	ORQ(hi, lo)
	xs := XMM()
	VMOVQ(lo, xs)
	d := emit.BroadcastF16(Mem{Base: p})
	scaleVec(xs, false, d, sc)
	// mins: lo = w1 & 0x3f3f3f3f, hi = ((w2>>4) & 0x0f0f0f0f) | ((w1>>6) & 0x03030303) << 4
	MOVL(w1.As32(), lo.As32())
	ANDL(U32(0x3f3f3f3f), lo.As32())
	MOVL(w2.As32(), hi.As32())
	SHRL(U8(4), hi.As32())
	ANDL(U32(0x0f0f0f0f), hi.As32())
	MOVL(w1.As32(), t.As32())
	SHRL(U8(6), t.As32())
	ANDL(U32(0x03030303), t.As32())
	SHLL(U8(4), t.As32())
	ORL(t.As32(), hi.As32())
	SHLQ(U8(32), hi)
	ORQ(hi, lo)
	xm := XMM()
	VMOVQ(lo, xm)
	dm := emit.BroadcastF16(Mem{Base: p, Disp: 2})
	scaleVec(xm, false, dm, sc.Offset(32))
}

// Q6_K: 210-byte blocks of 256: ql[128] @0 (low 4 bits), qh[64] @128 (high
// 2 bits), int8 scales[16] @192 (one per 16 values), d f16 @208; y = d·sc·(q−32).
// In each half n of 128 values, value 32c+l (l < 32) takes the low (c even)
// or high (c odd) nibble of ql[64n + l + 32·(c&1)] and bits 2c, 2c+1 of qh[32n+l].
func dotQ6K() {
	TEXT("dotQ6KAVX2", NOSPLIT, "func(blk *byte, x *float32, nblk int) float32")
	Doc("dotQ6KAVX2 is Σ decode(blk)[i]·x[i] over nblk q6_K blocks.")
	p, x, n := Load(Param("blk"), GP64()), Load(Param("x"), GP64()), Load(Param("nblk"), GP64())
	sc := AllocLocal(64)  // 16 scales·d
	qb := AllocLocal(128) // one half's levels, q−32 as int8
	acc := emit.Zeroed(4)
	masks := newQ6KMasks()
	emit.Loop("q6k", n, func() {
		q6kLevels(p, sc, qb, masks, func(half int) {
			for s := range 8 { // sub-blocks of 16
				xo := 4 * (128*half + 16*s)
				t, u := YMM(), YMM()
				VPMOVSXBD(qb.Offset(16*s), t)
				VCVTDQ2PS(t, t)
				VMULPS(Mem{Base: x, Disp: xo}, t, t)
				VPMOVSXBD(qb.Offset(16*s+8), u)
				VCVTDQ2PS(u, u)
				VFMADD231PS(Mem{Base: x, Disp: xo + 32}, u, t)
				b := YMM()
				VBROADCASTSS(sc.Offset(4*(8*half+s)), b)
				VFMADD231PS(b, t, acc[s%4])
			}
		})
		ADDQ(U32(210), p)
		ADDQ(U32(1024), x)
	})
	emit.Hsum(acc...)
}

// q6kMasks are the byte masks 0x0f, 0x30 and the offset 32, set up once
// per kernel.
type q6kMasks [3]reg.VecVirtual

func newQ6KMasks() q6kMasks {
	return q6kMasks{emit.BroadcastByte(0x0f), emit.BroadcastByte(0x30), emit.BroadcastByte(32)}
}

// q6kLevels writes the q6_K block at p's 16 scales·d as float32 into
// sc[0:64], then for each half (128 values) its levels q−32 as int8 into
// qb[0:128] and calls consume(half).
func q6kLevels(p reg.Register, sc, qb Mem, m q6kMasks, consume func(half int)) {
	m4, m30, c32 := m[0], m[1], m[2]
	d := emit.BroadcastF16(Mem{Base: p, Disp: 208})
	scaleVec(Mem{Base: p, Disp: 192}, true, d, sc)
	scaleVec(Mem{Base: p, Disp: 200}, true, d, sc.Offset(32))
	for half := range 2 {
		for c := range 4 {
			l := emit.Q6KLevels(p, half, c, m4, m30, c32)
			VMOVDQU(l, qb.Offset(32*c))
		}
		consume(half)
	}
}

// iq2xsScales writes the iq2_xs block at p's 16 group scales
// (0.5+s)·0.25·d as float32 into sc[0:64].
func iq2xsScales(p reg.Register, sc Mem) {
	d := emit.BroadcastF16(Mem{Base: p})
	// (0.5+s)·0.25·d = (2s+1)·d/8: the nibbles as 2s+1, times d/8.
	eighth := GP32()
	MOVL(U32(0x3e000000), eighth) // 0.125
	e := XMM()
	VMOVD(eighth, e)
	ey := YMM()
	VBROADCASTSS(e, ey)
	VMULPS(ey, d, d)
	b := XMM()
	VMOVQ(Mem{Base: p, Disp: 66}, b)
	lo, hi := XMM(), XMM()
	m4 := emit.BroadcastByte(0x0f)
	VPAND(m4.AsX(), b, lo)
	VPSRLW(U8(4), b, hi)
	VPAND(m4.AsX(), hi, hi)
	VPUNPCKLBW(hi, lo, lo) // s0, s1, s2, ... for the 16 groups
	for k := range 2 {
		v := YMM()
		if k == 0 {
			VPMOVZXBD(lo, v)
		} else {
			VPSRLDQ(U8(8), lo, hi)
			VPMOVZXBD(hi, v)
		}
		VPSLLD(U8(1), v, v)
		one := YMM()
		VPCMPEQD(one, one, one)
		VPSRLD(U8(31), one, one)
		VPADDD(one, v, v)
		VCVTDQ2PS(v, v)
		VMULPS(d, v, v)
		VMOVUPS(v, sc.Offset(32*k))
	}
}

// IQ2_XS: 74-byte blocks of 256: d f16 @0, qs uint16[32] @2 (9-bit grid
// index, 7-bit sign index per 8 values), 4-bit scales[8] @66 (one per 16
// values): y = d·(0.5+s)·0.25·grid·sign. grid is [512][8]float32 and signs
// [128][8]float32 (±1), the decoder's tables.
func dotIQ2XS() {
	TEXT("dotIQ2XSAVX2", NOSPLIT, "func(blk *byte, x *float32, nblk int, grid, signs *float32) float32")
	Doc("dotIQ2XSAVX2 is Σ decode(blk)[i]·x[i] over nblk iq2_xs blocks.")
	p, x, n := Load(Param("blk"), GP64()), Load(Param("x"), GP64()), Load(Param("nblk"), GP64())
	grid, signs := Load(Param("grid"), GP64()), Load(Param("signs"), GP64())
	sc := AllocLocal(64) // 16 scales·d·0.25 (the 0.5 offset folded in)
	acc := emit.Zeroed(4)
	emit.Loop("iq2", n, func() {
		iq2xsScales(p, sc)
		for g := range 16 {
			t := YMM()
			for k := range 2 {
				q, gi, si := GP64(), GP64(), GP64()
				MOVWQZX(Mem{Base: p, Disp: 2 + 2*(2*g+k)}, q)
				MOVQ(q, gi)
				ANDQ(U32(511), gi)
				SHLQ(U8(5), gi)
				MOVQ(q, si)
				SHRQ(U8(9), si)
				SHLQ(U8(5), si)
				v := YMM()
				VMOVUPS(Mem{Base: grid, Index: gi, Scale: 1}, v)
				VMULPS(Mem{Base: signs, Index: si, Scale: 1}, v, v)
				if k == 0 {
					VMULPS(Mem{Base: x, Disp: 4 * 16 * g}, v, t)
				} else {
					VFMADD231PS(Mem{Base: x, Disp: 4*16*g + 32}, v, t)
				}
			}
			s := YMM()
			VBROADCASTSS(sc.Offset(4*g), s)
			VFMADD231PS(s, t, acc[g%4])
		}
		ADDQ(U32(74), p)
		ADDQ(U32(1024), x)
	})
	emit.Hsum(acc...)
}

// The x4 kernels multiply one row of blocks with four activation rows at
// once (x, x+stride, x+2·stride, x+3·stride bytes), decoding each 8 weights
// once into a vector of their float32 values and taking four FMAs with it:
// prefill's batched matmuls decode a quarter as often. Two accumulators per
// row, summed at the end, into out[0:4].

// rows4 holds the four row bases' addressing and eight accumulators.
type rows4 struct {
	x, stride, stride3 reg.Register
	acc                [8]reg.VecVirtual
}

func newRows4() *rows4 {
	r := &rows4{x: Load(Param("x"), GP64()), stride: Load(Param("stride"), GP64())}
	r.stride3 = GP64()
	LEAQ(Mem{Base: r.stride, Index: r.stride, Scale: 2}, r.stride3)
	for i := range r.acc {
		r.acc[i] = YMM()
		VXORPS(r.acc[i], r.acc[i], r.acc[i])
	}
	return r
}

// fma adds v·x_r[off/4 : off/4+8] into each row's accumulator (bank 0 or 1).
func (r *rows4) fma(v reg.VecVirtual, off, bank int) {
	mems := []Mem{
		{Base: r.x, Disp: off},
		{Base: r.x, Index: r.stride, Scale: 1, Disp: off},
		{Base: r.x, Index: r.stride, Scale: 2, Disp: off},
		{Base: r.x, Index: r.stride3, Scale: 1, Disp: off},
	}
	for row, m := range mems {
		VFMADD231PS(m, v, r.acc[2*row+bank])
	}
}

// store sums each row's two accumulators horizontally into out[row].
func (r *rows4) store() {
	out := Load(Param("out"), GP64())
	for row := range 4 {
		a := r.acc[2*row]
		VADDPS(r.acc[2*row+1], a, a)
		hi := XMM()
		VEXTRACTF128(U8(1), a, hi)
		lo := a.AsX()
		VADDPS(hi, lo, lo)
		VMOVHLPS(lo, hi, hi)
		VADDPS(hi, lo, lo)
		VPSHUFD(U8(1), lo, hi)
		VADDSS(hi, lo, lo)
		VMOVSS(lo, Mem{Base: out, Disp: 4 * row})
	}
	VZEROUPPER()
	RET()
}

const x4Sig = "func(blk *byte, x *float32, stride int, nblk int, out *[4]float32)"

func dotQ8_0x4() {
	TEXT("dotQ8_0x4AVX2", NOSPLIT, x4Sig)
	Doc("dotQ8_0x4AVX2: out[r] = Σ decode(blk)[i]·x_r[i] over nblk q8_0 blocks, for the four rows x_r = x + r·stride bytes.")
	p, n := Load(Param("blk"), GP64()), Load(Param("nblk"), GP64())
	r := newRows4()
	emit.Loop("q8x4", n, func() {
		d := emit.BroadcastF16(Mem{Base: p})
		for k := range 4 {
			v := YMM()
			VPMOVSXBD(Mem{Base: p, Disp: 2 + 8*k}, v)
			VCVTDQ2PS(v, v)
			VMULPS(d, v, v)
			r.fma(v, 32*k, k%2)
		}
		ADDQ(U32(34), p)
		ADDQ(U32(128), r.x)
	})
	r.store()
}

func dotQ4Kx4() {
	TEXT("dotQ4Kx4AVX2", NOSPLIT, x4Sig)
	Doc("dotQ4Kx4AVX2: out[r] = Σ decode(blk)[i]·x_r[i] over nblk q4_K blocks, for the four rows x_r = x + r·stride bytes.")
	p, n := Load(Param("blk"), GP64()), Load(Param("nblk"), GP64())
	sc := AllocLocal(64)
	qb := AllocLocal(64)
	r := newRows4()
	m4 := emit.BroadcastByte(0x0f)
	emit.Loop("q4kx4", n, func() {
		q4kScales(p, sc)
		for c := range 4 {
			q, h := YMM(), YMM()
			VMOVDQU(Mem{Base: p, Disp: 16 + 32*c}, q)
			VPSRLW(U8(4), q, h)
			VPAND(m4, q, q)
			VPAND(m4, h, h)
			VMOVDQU(q, qb)
			VMOVDQU(h, qb.Offset(32))
			for half := range 2 {
				j := 2*c + half
				s, m := YMM(), YMM()
				VBROADCASTSS(sc.Offset(4*j), s)
				VBROADCASTSS(sc.Offset(32+4*j), m)
				for k := range 4 {
					v := YMM()
					VPMOVZXBD(qb.Offset(32*half+8*k), v)
					VCVTDQ2PS(v, v)
					VFMSUB213PS(m, s, v) // v = v·d·sc − dmin·m
					r.fma(v, 4*32*j+32*k, k%2)
				}
			}
		}
		ADDQ(U32(144), p)
		ADDQ(U32(1024), r.x)
	})
	r.store()
}

func dotQ6Kx4() {
	TEXT("dotQ6Kx4AVX2", NOSPLIT, x4Sig)
	Doc("dotQ6Kx4AVX2: out[r] = Σ decode(blk)[i]·x_r[i] over nblk q6_K blocks, for the four rows x_r = x + r·stride bytes.")
	p, n := Load(Param("blk"), GP64()), Load(Param("nblk"), GP64())
	sc := AllocLocal(64)
	qb := AllocLocal(128)
	r := newRows4()
	masks := newQ6KMasks()
	emit.Loop("q6kx4", n, func() {
		q6kLevels(p, sc, qb, masks, func(half int) {
			for s := range 8 {
				b := YMM()
				VBROADCASTSS(sc.Offset(4*(8*half+s)), b)
				for k := range 2 {
					v := YMM()
					VPMOVSXBD(qb.Offset(16*s+8*k), v)
					VCVTDQ2PS(v, v)
					VMULPS(b, v, v)
					r.fma(v, 4*(128*half+16*s+8*k), k)
				}
			}
		})
		ADDQ(U32(210), p)
		ADDQ(U32(1024), r.x)
	})
	r.store()
}

func dotIQ2XSx4() {
	TEXT("dotIQ2XSx4AVX2", NOSPLIT, "func(blk *byte, x *float32, stride int, nblk int, out *[4]float32, grid, signs *float32)")
	Doc("dotIQ2XSx4AVX2: out[r] = Σ decode(blk)[i]·x_r[i] over nblk iq2_xs blocks, for the four rows x_r = x + r·stride bytes.")
	p, n := Load(Param("blk"), GP64()), Load(Param("nblk"), GP64())
	grid, signs := Load(Param("grid"), GP64()), Load(Param("signs"), GP64())
	sc := AllocLocal(64)
	r := newRows4()
	emit.Loop("iq2x4", n, func() {
		iq2xsScales(p, sc)
		for g := range 16 {
			s := YMM()
			VBROADCASTSS(sc.Offset(4*g), s)
			for k := range 2 {
				q, gi, si := GP64(), GP64(), GP64()
				MOVWQZX(Mem{Base: p, Disp: 2 + 2*(2*g+k)}, q)
				MOVQ(q, gi)
				ANDQ(U32(511), gi)
				SHLQ(U8(5), gi)
				MOVQ(q, si)
				SHRQ(U8(9), si)
				SHLQ(U8(5), si)
				v := YMM()
				VMOVUPS(Mem{Base: grid, Index: gi, Scale: 1}, v)
				VMULPS(Mem{Base: signs, Index: si, Scale: 1}, v, v)
				VMULPS(s, v, v)
				r.fma(v, 4*(16*g+8*k), k)
			}
		}
		ADDQ(U32(74), p)
		ADDQ(U32(1024), r.x)
	})
	r.store()
}

// dotHalfx4: f16 or bf16 rows against four activation rows, n a multiple of 32.
func dotHalfx4(name string, f16 bool) {
	TEXT(name, NOSPLIT, "func(w *byte, x *float32, stride int, n int, out *[4]float32)")
	Doc(name + ": out[r] = Σ w[i]·x_r[i] over n values (a multiple of 32), for the four rows x_r = x + r·stride bytes.")
	w, n := Load(Param("w"), GP64()), Load(Param("n"), GP64())
	SHRQ(U8(5), n)
	r := newRows4()
	emit.Loop(name, n, func() {
		for k := range 4 {
			v := YMM()
			if f16 {
				VCVTPH2PS(Mem{Base: w, Disp: 16 * k}, v)
			} else {
				VPMOVZXWD(Mem{Base: w, Disp: 16 * k}, v)
				VPSLLD(U8(16), v, v)
			}
			r.fma(v, 32*k, k%2)
		}
		ADDQ(U32(64), w)
		ADDQ(U32(128), r.x)
	})
	r.store()
}
