// Command asm generates runtime/backend/cpu's amd64 AVX2+FMA kernels
// (vec_amd64.s, declared in vec_amd64_decl.go) with avo: the gated delta
// rule's and attention's. Run through `go generate ./runtime/backend/cpu`.
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
	Generate()
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
