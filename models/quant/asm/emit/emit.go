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
	lo := HsumX(accs[0])
	VZEROUPPER()
	Store(lo, ReturnIndex(0))
	RET()
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
// two high from qh. m4 and m3 mask the nibble and the two-bit field, c32 is
// 32 in every byte; with c32 nil the levels stay unsigned (0..63).
func Q6KLevels(p reg.Register, half, c int, m4, m3, c32 reg.VecVirtual) reg.VecVirtual {
	l, h := YMM(), YMM()
	VMOVDQU(Mem{Base: p, Disp: 64*half + 32*(c&1)}, l)
	if c >= 2 {
		VPSRLW(U8(4), l, l)
	}
	VPAND(m4, l, l)
	VMOVDQU(Mem{Base: p, Disp: 128 + 32*half}, h)
	if c > 0 {
		VPSRLW(U8(2*c), h, h)
	}
	VPAND(m3, h, h)
	VPSLLW(U8(4), h, h)
	VPOR(h, l, l)
	if c32 != nil {
		VPSUBB(c32, l, l)
	}
	return l
}
