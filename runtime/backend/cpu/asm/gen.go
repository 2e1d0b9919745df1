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
// float32 cache widened lane by lane) on register tiles of up to three
// queries: q·k against four keys at a time, and the weighted sum of value
// rows 16 elements at a time.
package main

import (
	"fmt"
	"math"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"
)

func main() {
	ConstraintExpr("amd64")
	kernel("gdnDecayDotAVX2", false)
	kernel("gdnUpdateDotAVX2", true)
	for nq := 1; nq <= 3; nq++ {
		attnQK(nq)
		attnPV(nq)
	}
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

// attnQK: attention's q·k for a tile of nq queries (nq ≤ 3) and n keys,
// out[r·os+j] = Σ_i q[r·qs+i]·float64(k[j·ks+i]), four keys at a time, then
// one. Each (query, key) pair has one accumulator of four lanes, lane l the
// elements i ≡ l (mod 4) in order, one FMA each, summed (l0+l2)+(l1+l3): the
// order depends on hd alone, not on the tile. Per four elements of a 3×4
// tile: three query loads, four widened key loads, twelve FMAs, so the loads
// no longer bound it. Strides in elements; hd a multiple of 4.
func attnQK(nq int) {
	name := fmt.Sprintf("attnQK%dAVX2", nq)
	TEXT(name, NOSPLIT, "func(q *float64, qs int, k *float32, ks int, out *float64, os, n, hd int)")
	Doc(name + fmt.Sprintf(": out[r·os+j] = Σ_i q[r·qs+i]·float64(k[j·ks+i]) for r < %d, j < n; hd a multiple of 4.", nq))
	q0, qs := Load(Param("q"), GP64()), Load(Param("qs"), GP64())
	k, ks := Load(Param("k"), GP64()), Load(Param("ks"), GP64())
	out, os := Load(Param("out"), GP64()), Load(Param("os"), GP64())
	n, hdb := Load(Param("n"), GP64()), Load(Param("hd"), GP64())
	SHLQ(U8(3), qs)
	SHLQ(U8(2), ks)
	SHLQ(U8(3), os)
	SHLQ(U8(2), hdb) // bytes of a key row's hd elements
	// The bases point past the rows' ends and i runs from −hd up to 0: k
	// by i, q by 2i (doubles).
	ADDQ(hdb, k)
	ADDQ(hdb, q0)
	ADDQ(hdb, q0)
	qb := []reg.Register{q0}
	for r := 1; r < nq; r++ {
		b := GP64()
		MOVQ(qb[r-1], b)
		ADDQ(qs, b)
		qb = append(qb, b)
	}
	for _, keys := range []int{4, 1} {
		lbl := fmt.Sprintf("%s_k%d", name, keys)
		Label(lbl)
		CMPQ(n, U8(keys))
		JL(LabelRef(lbl + "_end"))
		kb := []reg.Register{k}
		for j := 1; j < keys; j++ {
			b := GP64()
			MOVQ(kb[j-1], b)
			ADDQ(ks, b)
			kb = append(kb, b)
		}
		acc := make([][]reg.VecVirtual, nq)
		for r := range acc {
			for range keys {
				a := YMM()
				VXORPD(a, a, a)
				acc[r] = append(acc[r], a)
			}
		}
		i := GP64()
		MOVQ(hdb, i)
		NEGQ(i)
		Label(lbl + "_loop")
		qv := make([]reg.VecVirtual, nq)
		for r := range qv {
			qv[r] = YMM()
			VMOVUPD(Mem{Base: qb[r], Index: i, Scale: 2}, qv[r])
		}
		for j := range keys {
			x := YMM()
			VCVTPS2PD(Mem{Base: kb[j], Index: i, Scale: 1}, x)
			for r := range nq {
				VFMADD231PD(qv[r], x, acc[r][j])
			}
		}
		ADDQ(U8(16), i)
		JNZ(LabelRef(lbl + "_loop"))
		for r := range nq {
			for j := range keys {
				a := acc[r][j]
				hi := XMM()
				VEXTRACTF128(U8(1), a, hi)
				lo := a.AsX()
				VADDPD(hi, lo, lo)
				VHADDPD(lo, lo, lo)
				dst := Mem{Base: out, Disp: 8 * j}
				if r > 0 {
					dst = Mem{Base: out, Index: os, Scale: uint8(r), Disp: 8 * j}
				}
				VMOVSD(lo, dst)
			}
		}
		ADDQ(U8(8*keys), out)
		for range keys {
			ADDQ(ks, k)
		}
		SUBQ(U8(keys), n)
		JMP(LabelRef(lbl))
		Label(lbl + "_end")
	}
	VZEROUPPER()
	RET()
}

// attnPV: attention's weighted value sum for nq queries (nq ≤ 3),
// acc[r·as+i] += w[r·ws+j]·float64(v[j·vs+i]) for the n keys j in order, one
// FMA each: the same additions in the same order as one query and one key
// at a time. The tile holds 16 elements of nq accumulator rows in registers
// over all n keys (then 4 at a time for the rest of hd). Strides in
// elements; hd a multiple of 4, n ≥ 1.
func attnPV(nq int) {
	name := fmt.Sprintf("attnPV%dAVX2", nq)
	TEXT(name, NOSPLIT, "func(acc *float64, as int, v *float32, vs int, w *float64, ws, n, hd int)")
	Doc(name + fmt.Sprintf(": acc[r·as+i] += w[r·ws+j]·float64(v[j·vs+i]) for r < %d, j < n in order; hd a multiple of 4, n ≥ 1.", nq))
	acc, as := Load(Param("acc"), GP64()), Load(Param("as"), GP64())
	v, vs := Load(Param("v"), GP64()), Load(Param("vs"), GP64())
	w, ws := Load(Param("w"), GP64()), Load(Param("ws"), GP64())
	n, hd := Load(Param("n"), GP64()), Load(Param("hd"), GP64())
	SHLQ(U8(3), as)
	SHLQ(U8(2), vs)
	SHLQ(U8(3), ws)
	for _, width := range []int{4, 1} { // 16 elements, then 4
		lbl := fmt.Sprintf("%s_w%d", name, 4*width)
		Label(lbl)
		CMPQ(hd, U8(4*width))
		JL(LabelRef(lbl + "_end"))
		a := make([][]reg.VecVirtual, nq)
		for r := range a {
			for m := range width {
				x := YMM()
				src := Mem{Base: acc, Disp: 32 * m}
				if r > 0 {
					src = Mem{Base: acc, Index: as, Scale: uint8(r), Disp: 32 * m}
				}
				VMOVUPD(src, x)
				a[r] = append(a[r], x)
			}
		}
		p, wp, j := GP64(), GP64(), GP64()
		MOVQ(v, p)
		MOVQ(w, wp)
		MOVQ(n, j)
		Label(lbl + "_loop")
		wv := make([]reg.VecVirtual, nq)
		for r := range wv {
			wv[r] = YMM()
			src := Mem{Base: wp}
			if r > 0 {
				src = Mem{Base: wp, Index: ws, Scale: uint8(r)}
			}
			VBROADCASTSD(src, wv[r])
		}
		for m := range width {
			x := YMM()
			VCVTPS2PD(Mem{Base: p, Disp: 16 * m}, x)
			for r := range nq {
				VFMADD231PD(wv[r], x, a[r][m])
			}
		}
		ADDQ(vs, p)
		ADDQ(U8(8), wp)
		DECQ(j)
		JNZ(LabelRef(lbl + "_loop"))
		for r := range nq {
			for m := range width {
				dst := Mem{Base: acc, Disp: 32 * m}
				if r > 0 {
					dst = Mem{Base: acc, Index: as, Scale: uint8(r), Disp: 32 * m}
				}
				VMOVUPD(a[r][m], dst)
			}
		}
		ADDQ(U8(32*width), acc)
		ADDQ(U8(16*width), v)
		SUBQ(U8(4*width), hd)
		JMP(LabelRef(lbl))
		Label(lbl + "_end")
	}
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
