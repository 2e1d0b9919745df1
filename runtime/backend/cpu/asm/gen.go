// Command asm generates runtime/backend/cpu's amd64 AVX2+FMA kernels
// (vec_amd64.s, declared in vec_amd64_decl.go) with avo: the gated delta
// rule's, attention's (its dots, value sums and softmax exp) and the MLPs'
// silu. Run through `go generate ./runtime/backend/cpu`.
//
// Both gated-delta kernels sweep the dk×dv state S of one value head column
// block by column block (32 columns, then 8), so each column's sum over the
// dk rows stays in one register: float32, rows in order, one FMA each.
//
// The attention kernels keep the cpu backend's float64 arithmetic (the
// float32 cache widened lane by lane): q·k for a run of keys, and the
// weighted sum of value rows.
package main

import (
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64")
	kernel("gdnDecayDotAVX2", false)
	kernel("gdnUpdateDotAVX2", true)
	attnDots()
	attnAxpy()
	expConsts()
	siluKernel(true)
	siluKernel(false)
	expShift()
	Generate()
}

// expTable is the constants of expPD (one shared table), 32 bytes each so
// that every one is a full vector operand: the clamp ±708, log2 e, ln 2 in
// two parts, the Taylor coefficients 1/12! … 1/0!, then four int64 1023s.
var expTable Mem

func expConsts() {
	fact := 1.0
	coef := make([]float64, expDegree+1) // coef[j] = 1/j!
	for j := range coef {
		if j > 0 {
			fact *= float64(j)
		}
		coef[j] = 1 / fact
	}
	consts := []float64{-708, 708, 1.4426950408889634, 0.6931471803691238, 1.9082149292705877e-10}
	for j := expDegree; j >= 0; j-- {
		consts = append(consts, coef[j])
	}
	expTable = GLOBL("exp_consts", RODATA|NOPTR)
	for i, c := range consts {
		for l := 0; l < 4; l++ {
			DATA(32*i+8*l, U64(math.Float64bits(c))) // bits: avo writes an integral F64 as an integer
		}
	}
	for l := 0; l < 4; l++ {
		DATA(32*len(consts)+8*l, U64(1023))
	}
}

// expAt is constant i of expTable; expOne is 1/0! = 1, expBias the 1023s.
func expAt(i int) Mem { return expTable.Offset(32 * i) }

const (
	expDegree = 12
	expOne    = 5 + expDegree
	expBias   = expOne + 1
)

// expPD returns e^t for the four doubles of t (clobbered): t clamped to
// ±708, k = round(t·log2 e), r = t − k·ln 2 (ln 2 in two parts, |r| ≤ 0.35),
// e^r by its Taylor series to r¹² (the next term is 2e-16 of it at most),
// times 2^k built in the exponent bits. Only the last bits of a double
// differ from math.Exp.
func expPD(t reg.VecVirtual) reg.VecVirtual {
	k, p := YMM(), YMM()
	VMAXPD(expAt(0), t, t)
	VMINPD(expAt(1), t, t)
	VMULPD(expAt(2), t, k)
	VROUNDPD(U8(0), k, k)        // to nearest
	VFNMADD231PD(expAt(3), k, t) // r = t − k·ln2hi
	VFNMADD231PD(expAt(4), k, t) // r −= k·ln2lo
	VMOVUPD(expAt(5), p)         // 1/12!
	for j := 6; j <= expOne; j++ {
		VFMADD213PD(expAt(j), t, p) // p = p·r + 1/(expOne−j)!
	}
	ki := XMM()
	VCVTPD2DQY(k, ki)
	scale := YMM()
	VPMOVSXDQ(ki, scale)
	VPADDQ(expAt(expBias), scale, scale)
	VPSLLQ(U8(52), scale, scale)
	VMULPD(scale, p, p)
	return p
}

// siluKernel: h[i] = float32(silu(g[i])·u[i]) (siluMulAVX2) or
// h[i] = float32(silu(g[i])) (siluAVX2; h may be g), with silu(x) =
// x/(1 + e^−x), in float64 as the Go kernels compute it, four lanes a step
// (n a multiple of 4). Only e^−x's last bits differ from math.Exp, so the
// float32 results match the Go kernel's but for a rare rounding tie.
func siluKernel(mul bool) {
	name := map[bool]string{true: "siluMul", false: "silu"}[mul]
	if mul {
		TEXT("siluMulAVX2", NOSPLIT, "func(h, gate, up *float32, n int)")
		Doc("siluMulAVX2: h[i] = float32(silu(gate[i])·up[i]) in float64 for i < n; n a multiple of 4.")
	} else {
		TEXT("siluAVX2", NOSPLIT, "func(h, x *float32, n int)")
		Doc("siluAVX2: h[i] = float32(silu(x[i])) in float64 for i < n (h may be x); n a multiple of 4.")
	}
	var h, g, u, n reg.Register
	if mul {
		h, g, u, n = Load(Param("h"), GP64()), Load(Param("gate"), GP64()), Load(Param("up"), GP64()), Load(Param("n"), GP64())
	} else {
		h, g, n = Load(Param("h"), GP64()), Load(Param("x"), GP64()), Load(Param("n"), GP64())
	}
	zero := YMM()
	VXORPD(zero, zero, zero)
	Label(name + "_loop")
	x, y, t := YMM(), YMM(), YMM()
	VCVTPS2PD(Mem{Base: g}, x)
	if mul {
		VCVTPS2PD(Mem{Base: u}, y)
	}
	VSUBPD(x, zero, t) // t = −x
	p := expPD(t)
	VADDPD(expAt(expOne), p, p) // 1 + e^−x
	VDIVPD(p, x, x)             // silu(x)
	if mul {
		VMULPD(y, x, x)
	}
	out := XMM()
	VCVTPD2PSY(x, out)
	VMOVUPS(out, Mem{Base: h})
	ADDQ(U8(16), g)
	if mul {
		ADDQ(U8(16), u)
	}
	ADDQ(U8(16), h)
	SUBQ(U8(4), n)
	JNZ(LabelRef(name + "_loop"))
	VZEROUPPER()
	RET()
}

// expShift: x[i] = e^(x[i] − m) in float64 (attention's softmax, m the
// scores' maximum), four lanes a step, n a multiple of 4.
func expShift() {
	TEXT("expShiftAVX2", NOSPLIT, "func(x *float64, n int, m float64)")
	Doc("expShiftAVX2: x[i] = e^(x[i]−m) in float64 for i < n; n a multiple of 4.")
	x, n := Load(Param("x"), GP64()), Load(Param("n"), GP64())
	mx := XMM()
	Load(Param("m"), mx)
	m := YMM()
	VBROADCASTSD(mx, m)
	Label("exp_loop")
	t := YMM()
	VMOVUPD(Mem{Base: x}, t)
	VSUBPD(m, t, t)
	p := expPD(t)
	VMOVUPD(p, Mem{Base: x})
	ADDQ(U8(32), x)
	SUBQ(U8(4), n)
	JNZ(LabelRef("exp_loop"))
	VZEROUPPER()
	RET()
}

// attnDots: out[j] = Σ_i q[i]·k[j·stride + i] for j < n, in float64 with
// four accumulators of 4 lanes (16 elements a step, then one step of 8: hd a
// multiple of 8), so four FMA chains overlap.
func attnDots() {
	TEXT("attnDotsAVX2", NOSPLIT, "func(q *float64, k *float32, out *float64, n, stride, hd int)")
	Doc("attnDotsAVX2: out[j] = Σ_i q[i]·float64(k[j·stride+i]) for j < n; hd a multiple of 8, stride in elements.")
	q, k, out := Load(Param("q"), GP64()), Load(Param("k"), GP64()), Load(Param("out"), GP64())
	n, stride, hd := Load(Param("n"), GP64()), Load(Param("stride"), GP64()), Load(Param("hd"), GP64())
	SHLQ(U8(2), stride) // bytes per key row
	Label("dots_keys")
	TESTQ(n, n)
	JZ(LabelRef("dots_end"))
	acc := []reg.VecVirtual{YMM(), YMM(), YMM(), YMM()}
	for _, a := range acc {
		VXORPD(a, a, a)
	}
	qp, kp, i := GP64(), GP64(), GP64()
	MOVQ(q, qp)
	MOVQ(k, kp)
	MOVQ(hd, i)
	Label("dots_16")
	CMPQ(i, U8(16))
	JL(LabelRef("dots_8"))
	for m, a := range acc {
		x := YMM()
		VCVTPS2PD(Mem{Base: kp, Disp: 16 * m}, x)
		VFMADD231PD(Mem{Base: qp, Disp: 32 * m}, x, a)
	}
	ADDQ(U8(64), kp)
	ADDQ(U32(128), qp)
	SUBQ(U8(16), i)
	JMP(LabelRef("dots_16"))
	Label("dots_8")
	TESTQ(i, i)
	JZ(LabelRef("dots_sum"))
	for m, a := range acc[:2] {
		x := YMM()
		VCVTPS2PD(Mem{Base: kp, Disp: 16 * m}, x)
		VFMADD231PD(Mem{Base: qp, Disp: 32 * m}, x, a)
	}
	Label("dots_sum")
	VADDPD(acc[1], acc[0], acc[0])
	VADDPD(acc[3], acc[2], acc[2])
	VADDPD(acc[2], acc[0], acc[0])
	hi := XMM()
	VEXTRACTF128(U8(1), acc[0], hi)
	lo := acc[0].AsX()
	VADDPD(hi, lo, lo)
	VHADDPD(lo, lo, lo)
	MOVSD(lo, Mem{Base: out})
	ADDQ(U8(8), out)
	ADDQ(stride, k)
	DECQ(n)
	JMP(LabelRef("dots_keys"))
	Label("dots_end")
	VZEROUPPER()
	RET()
}

// attnAxpy: acc[i] += w·v[i] in float64 (hd a multiple of 4).
func attnAxpy() {
	TEXT("attnAxpyAVX2", NOSPLIT, "func(acc *float64, v *float32, w float64, hd int)")
	Doc("attnAxpyAVX2: acc[i] += w·float64(v[i]) for i < hd; hd a multiple of 4.")
	acc, v, hd := Load(Param("acc"), GP64()), Load(Param("v"), GP64()), Load(Param("hd"), GP64())
	wx := XMM()
	Load(Param("w"), wx)
	w := YMM()
	VBROADCASTSD(wx, w)
	Label("axpy_elems")
	x, a := YMM(), YMM()
	VCVTPS2PD(Mem{Base: v}, x)
	VMOVUPD(Mem{Base: acc}, a)
	VFMADD231PD(w, x, a)
	VMOVUPD(a, Mem{Base: acc})
	ADDQ(U8(16), v)
	ADDQ(U8(32), acc)
	SUBQ(U8(4), hd)
	JNZ(LabelRef("axpy_elems"))
	VZEROUPPER()
	RET()
}

// kernel: without update, S *= e and u = Sᵀk (decay, then the state's
// prediction for key k); with it, S += k·deltaᵀ and u = Sᵀq (the write, then
// the output for query q). a is k, b is e's splat (decay) or q (update).
func kernel(name string, update bool) {
	if update {
		TEXT(name, NOSPLIT, "func(s, k, delta, q, u *float32, dk, dv int)")
		Doc(name + ": S[i][c] += k[i]·delta[c], then u[c] = Σ_i S[i][c]·q[i]; dv a multiple of 8.")
	} else {
		TEXT(name, NOSPLIT, "func(s, k, u *float32, dk, dv int, e float32)")
		Doc(name + ": S[i][c] *= e, then u[c] = Σ_i S[i][c]·k[i]; dv a multiple of 8.")
	}
	s, k, u := Load(Param("s"), GP64()), Load(Param("k"), GP64()), Load(Param("u"), GP64())
	dk, dv := Load(Param("dk"), GP64()), Load(Param("dv"), GP64())
	var delta, q reg.Register
	var e reg.VecVirtual
	if update {
		delta, q = Load(Param("delta"), GP64()), Load(Param("q"), GP64())
	} else {
		ex := XMM()
		Load(Param("e"), ex)
		e = YMM()
		VBROADCASTSS(ex, e)
	}
	stride := GP64() // bytes per state row
	MOVQ(dv, stride)
	SHLQ(U8(2), stride)
	for _, width := range []int{4, 1} { // column blocks of 32, then 8
		lbl := name + map[int]string{4: "_w32", 1: "_w8"}[width]
		Label(lbl + "_cols")
		CMPQ(dv, U32(8*width))
		JL(LabelRef(lbl + "_end"))
		acc := make([]reg.VecVirtual, width)
		d := make([]reg.VecVirtual, width)
		for m := range acc {
			acc[m] = YMM()
			VXORPS(acc[m], acc[m], acc[m])
			if update {
				d[m] = YMM()
				VMOVUPS(Mem{Base: delta, Disp: 32 * m}, d[m])
			}
		}
		row, i, kp, qp := GP64(), GP64(), GP64(), GP64()
		MOVQ(s, row)
		MOVQ(k, kp)
		if update {
			MOVQ(q, qp)
		}
		MOVQ(dk, i)
		TESTQ(i, i)
		JZ(LabelRef(lbl + "_store"))
		Label(lbl + "_rows")
		kb := YMM()
		VBROADCASTSS(Mem{Base: kp}, kb)
		var qb reg.VecVirtual
		if update {
			qb = YMM()
			VBROADCASTSS(Mem{Base: qp}, qb)
		}
		for m := range acc {
			v := YMM()
			VMOVUPS(Mem{Base: row, Disp: 32 * m}, v)
			if update {
				VFMADD231PS(d[m], kb, v)
				VMOVUPS(v, Mem{Base: row, Disp: 32 * m})
				VFMADD231PS(qb, v, acc[m])
			} else {
				VMULPS(e, v, v)
				VMOVUPS(v, Mem{Base: row, Disp: 32 * m})
				VFMADD231PS(kb, v, acc[m])
			}
		}
		ADDQ(stride, row)
		ADDQ(U8(4), kp)
		if update {
			ADDQ(U8(4), qp)
		}
		DECQ(i)
		JNZ(LabelRef(lbl + "_rows"))
		Label(lbl + "_store")
		for m := range acc {
			VMOVUPS(acc[m], Mem{Base: u, Disp: 32 * m})
		}
		ADDQ(U32(32*width), s)
		ADDQ(U32(32*width), u)
		if update {
			ADDQ(U32(32*width), delta)
		}
		SUBQ(U32(8*width), dv)
		JMP(LabelRef(lbl + "_cols"))
		Label(lbl + "_end")
	}
	VZEROUPPER()
	RET()
}
