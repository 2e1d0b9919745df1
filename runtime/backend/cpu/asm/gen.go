// Command asm generates runtime/backend/cpu's amd64 AVX2+FMA kernels for the gated
// delta rule (gdn_amd64.s, declared in gdn_amd64_decl.go) with avo. Run
// through `go generate ./runtime/backend/cpu`.
//
// Both kernels sweep the dk×dv state S of one value head column block by
// column block (32 columns, then 8), so each column's sum over the dk rows
// stays in one register: float32, rows in order, one FMA each.
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
	Generate()
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
