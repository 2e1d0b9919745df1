// Package emit holds the avo building blocks both of models/quant's
// assembly generators use (the float dots in asm, the integer dots in
// asm/act8): loops, zeroed accumulators, horizontal sums and broadcasts.
// They emit into avo's global build context, as the generators' own code
// does.
package emit

import (
	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

// Hsum adds the float32 accumulators accs into one value, stores it as the
// function's first result and returns.
func Hsum(accs ...reg.VecVirtual) {
	lo := HsumX(AddTree(accs...))
	VZEROUPPER()
	Store(lo, ReturnIndex(0))
	RET()
}

// AddTree adds the float32 accumulators accs pairwise (a tree, not a chain)
// and returns the register holding the sum.
func AddTree(accs ...reg.VecVirtual) reg.VecVirtual {
	for len(accs) > 1 {
		var next []reg.VecVirtual
		for i := 0; i+1 < len(accs); i += 2 {
			VADDPS(accs[i+1], accs[i], accs[i])
			next = append(next, accs[i])
		}
		if len(accs)%2 == 1 {
			next = append(next, accs[len(accs)-1])
		}
		accs = next
	}
	return accs[0]
}

// HsumX is the sum of y's eight float32 lanes, in the low lane of an xmm.
func HsumX(y reg.VecVirtual) reg.Register {
	hi := XMM()
	VEXTRACTF128(U8(1), y, hi)
	lo := y.AsX()
	VADDPS(hi, lo, lo)
	VMOVHLPS(lo, hi, hi)
	VADDPS(hi, lo, lo)
	VPSHUFD(U8(1), lo, hi)
	VADDSS(hi, lo, lo)
	return lo
}

// Zeroed is n zeroed ymm registers.
func Zeroed(n int) []reg.VecVirtual {
	out := make([]reg.VecVirtual, n)
	for i := range out {
		out[i] = YMM()
		VXORPS(out[i], out[i], out[i])
	}
	return out
}

// Loop emits: if n == 0 skip; do { body } while --n != 0.
func Loop(name string, n reg.Register, body func()) {
	TESTQ(n, n)
	JZ(LabelRef(name + "_done"))
	Label(name + "_loop")
	body()
	DECQ(n)
	JNZ(LabelRef(name + "_loop"))
	Label(name + "_done")
}

// F16Scalar loads the ggml_half at m as a float32 in the low lane of an xmm.
func F16Scalar(m Mem) reg.VecVirtual {
	t := GP32()
	MOVWLZX(m, t)
	x := XMM()
	VMOVD(t, x)
	VCVTPH2PS(x, x)
	return x
}

// BroadcastF16 loads the ggml_half at m and broadcasts it as float32.
func BroadcastF16(m Mem) reg.VecVirtual {
	x := F16Scalar(m)
	y := YMM()
	VBROADCASTSS(x, y)
	return y
}

// BroadcastByte returns a vector with every byte b.
func BroadcastByte(b uint8) reg.VecVirtual {
	t := GP32()
	MOVL(U32(uint32(b)*0x01010101), t)
	x := XMM()
	VMOVD(t, x)
	y := YMM()
	VPBROADCASTD(x, y)
	return y
}

// Q6KLevels loads the 32 six-bit levels of q6_k quarter c of half half of the
// block at p, as signed bytes (level − 32): the four low bits from ql, the
// two high from qh, each shifted straight to its place and masked (as
// ggml's AVX2 q6_K dot: bits 2c, 2c+1 of qh land on bits 4, 5 by one word
// shift, none for c = 2). m4 masks the nibble, m30 is 0x30 in every byte,
// c32 is 32 in every byte; with c32 nil the levels stay unsigned (0..63).
func Q6KLevels(p reg.Register, half, c int, m4, m30, c32 reg.VecVirtual) reg.VecVirtual {
	l, h := YMM(), YMM()
	VMOVDQU(Mem{Base: p, Disp: 64*half + 32*(c&1)}, l)
	if c >= 2 {
		VPSRLW(U8(4), l, l)
	}
	VPAND(m4, l, l)
	VMOVDQU(Mem{Base: p, Disp: 128 + 32*half}, h)
	switch c {
	case 0:
		VPSLLW(U8(4), h, h)
	case 1:
		VPSLLW(U8(2), h, h)
	case 3:
		VPSRLW(U8(2), h, h)
	}
	VPAND(m30, h, h)
	VPOR(h, l, l)
	if c32 != nil {
		VPSUBB(c32, l, l)
	}
	return l
}

// Q6KQuarters returns the unsigned six-bit levels (0..63) of the q6_k
// block at p for quarter c of half half, to be called for c = 0, 1, 2, 3
// in turn within a half: the half's 64 ql bytes and 32 qh bytes are loaded
// at c = 0 and kept for the other three (Q6KLevels' bit placement, without
// its reloads). m4 is 0x0f and m30 0x30 in every byte.
func Q6KQuarters(p reg.Register, m4, m30 reg.VecVirtual) func(half, c int) reg.VecVirtual {
	var ql [2]reg.VecVirtual
	var qh reg.VecVirtual
	return func(half, c int) reg.VecVirtual {
		if c == 0 {
			ql = [2]reg.VecVirtual{YMM(), YMM()}
			qh = YMM()
			VMOVDQU(Mem{Base: p, Disp: 64 * half}, ql[0])
			VMOVDQU(Mem{Base: p, Disp: 64*half + 32}, ql[1])
			VMOVDQU(Mem{Base: p, Disp: 128 + 32*half}, qh)
		}
		l, h := YMM(), YMM()
		if c >= 2 {
			VPSRLW(U8(4), ql[c&1], l)
			VPAND(m4, l, l)
		} else {
			VPAND(m4, ql[c&1], l)
		}
		switch c {
		case 0:
			VPSLLW(U8(4), qh, h)
			VPAND(m30, h, h)
		case 1:
			VPSLLW(U8(2), qh, h)
			VPAND(m30, h, h)
		case 2:
			VPAND(m30, qh, h)
		case 3:
			VPSRLW(U8(2), qh, h)
			VPAND(m30, h, h)
		}
		VPOR(h, l, l)
		return l
	}
}
