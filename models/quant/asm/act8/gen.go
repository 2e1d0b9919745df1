// Command act8 generates models/quant's amd64 AVX2 integer dot products of
// stored blocks with q8-quantized activations (act8_amd64.s and their
// declarations in act8_amd64_decl.go) with avo, as ggml's vec_dot_*_q8_*:
// the activation row is int8 in blocks of 32, one float32 scale per block
// (quant.Act8). Per 32 values the kernel forms the integer dot Σ w·a with
// VPMADDUBSW (unsigned × signed bytes; signed weights go through VPSIGNB:
// |w| × a·sign(w)) and VPMADDWD, converts it to float32 once and multiplies
// it by the weight scale × the activation block's scale. Run through
// `go generate ./models/quant`.
package main

import (
	"fmt"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/strata-llm/strata/models/quant/asm/emit"
)

func main() {
	ConstraintExpr("amd64")
	dotQ8_0()
	dotK16(q6k, 1)
	dotK32(q4k, 1)
	dotK32(q4k, 4)
	dotK16(q6k, 4)
	dotIQ2XS(1)
	dotIQ2XS(4)
	quantizeAct8()
	quantizeAct8Max()
	absMax256()
	dotIQ4NL()
	dotIQ4XS()
	dotQ8_0xN(4)
	dotIQ4NLx4()
	dotIQ4XSx4()
	for _, f := range []k16{q2k, q3k} {
		dotK16(f, 1)
		dotK16(f, 4)
	}
	dotK32(q5k, 1)
	dotK32(q5k, 4)
	for _, f := range []legacy{q4_0, q4_1, q5_0, q5_1} {
		dotLegacy(f, 1)
		dotLegacy(f, 4)
	}
	iqKernels()
	for _, rows := range []int{2, 8} {
		dotQ8_0xN(rows)
		dotK32(q4k, rows)
		dotK32(q5k, rows)
	}
	for _, rows := range []int{2, 4, 8} {
		dotK32K(q4k, rows)
		dotK32K(q5k, rows)
	}
	Generate()
}

// prefetch is how far ahead of the weights being multiplied the kernels
// ask for the next lines: with the hardware prefetcher alone a 330 MB
// q8_0 matrix streamed at ~7 GB/s on two threads here, with 2 KiB ahead
// at ~9 GB/s (512 B: ~8.4).
const prefetch = 2048

// prefetchLines asks for the lines of the n bytes at p+prefetch.
func prefetchLines(p reg.Register, n int) {
	for off := 0; off < n; off += 64 {
		PREFETCHT0(Mem{Base: p, Disp: prefetch + off})
	}
}

// onesW is a vector of int16 ones (VPMADDWD by it sums adjacent pairs).
func onesW() reg.VecVirtual {
	o := YMM()
	VPCMPEQW(o, o, o)
	VPSRLW(U8(15), o, o)
	return o
}

// signedDot turns the 32 signed weights in w and the activations a into
// the 16 int16 pair sums of w·a (w and a are clobbered; the result in w).
func signedDot(w, a reg.VecVirtual) {
	VPSIGNB(w, a, a)
	VPSIGNB(w, w, w)
	VPMADDUBSW(a, w, w)
}

// blockScales stores the 8 products s·d[j] (s a vector, d the
// activation scales of one 256-value block's 8 blocks) into f.
func blockScales(s reg.VecVirtual, d Mem, f Mem) {
	t := YMM()
	VMULPS(d, s, t)
	VMOVUPS(t, f)
}

// scaleFMA adds float32(dot) × f (a float32 in memory) to acc, dot being 8 int32.
func scaleFMA(dot reg.VecVirtual, f Mem, acc reg.VecVirtual) {
	VCVTDQ2PS(dot, dot)
	t := YMM()
	VBROADCASTSS(f, t)
	VFMADD231PS(t, dot, acc)
}

// Q8_0: 34-byte blocks of 32, d f16 @0, qs int8[32] @2; a rows kernel
// (rowsParams without sums).
func dotQ8_0() {
	name := "dotQ8_0Q8AVX2"
	TEXT(name, NOSPLIT, "func(blk *byte, stride int, q *int8, d *float32, nblk int, out *float32, rows int) float32")
	Doc(name+" sets out[i] (out non-nil) to Σ decode(blk + i·stride)[j]·(d[j/32]·q[j]) over nblk q8_0 blocks",
		"for i < rows, and returns the last (a run of weight rows with one activation row in one call); in integers per block.")
	p, q, d, n := GP64(), GP64(), GP64(), GP64()
	rl := startRows(name, p, rowParam{"q", q}, rowParam{"d", d}, rowParam{"nblk", n})
	ones := onesW()
	rl.beginRow()
	acc := emit.Zeroed(2)
	pairs := GP64()
	MOVQ(n, pairs)
	SHRQ(U8(1), pairs)
	one := func(k int) {
		w, a := YMM(), YMM()
		VMOVDQU(Mem{Base: p, Disp: 34*k + 2}, w)
		VMOVDQU(Mem{Base: q, Disp: 32 * k}, a)
		signedDot(w, a)
		VPMADDWD(ones, w, w)
		s := emit.F16Scalar(Mem{Base: p, Disp: 34 * k})
		VMULSS(Mem{Base: d, Disp: 4 * k}, s, s)
		sy := YMM()
		VBROADCASTSS(s, sy)
		VCVTDQ2PS(w, w)
		VFMADD231PS(sy, w, acc[k])
	}
	emit.Loop("q8", pairs, func() {
		prefetchLines(p, 68)
		one(0)
		one(1)
		ADDQ(U32(68), p)
		ADDQ(U32(64), q)
		ADDQ(U32(8), d)
	})
	ANDQ(U32(1), n)
	JZ(LabelRef("q8_tail_done"))
	one(0)
	Label("q8_tail_done")
	rl.endRow(acc)
}

// q4kScales returns the q4_K block at p's 8 scales·d and 8 mins·dmin as
// float32 vectors.
func q4kScales(p reg.Register) (reg.VecVirtual, reg.VecVirtual) {
	scf, mnf := q4kScaleInts(p, true, true)
	VCVTDQ2PS(scf, scf)
	VCVTDQ2PS(mnf, mnf)
	dd := emit.F16Scalar(Mem{Base: p})
	dy := YMM()
	VBROADCASTSS(dd, dy)
	VMULPS(dy, scf, scf)
	dm := emit.F16Scalar(Mem{Base: p, Disp: 2})
	dmy := YMM()
	VBROADCASTSS(dm, dmy)
	VMULPS(dmy, mnf, mnf)
	return scf, mnf
}

// q4kScaleInts returns the block at p's 8 scales and 8 mins (those asked
// for, else nil) as int32 lanes.
func q4kScaleInts(p reg.Register, scales, mins bool) (reg.VecVirtual, reg.VecVirtual) {
	// Scales and mins of sub-blocks 0-3 are the low 6 bits of bytes 0-3 and
	// 4-7; those of 4-7 take their low 4 bits from the nibbles of bytes
	// 8-11 and their high 2 bits from the top of bytes 0-7.
	w2 := GP64()
	MOVL(Mem{Base: p, Disp: 12}, w2.As32())
	pack := func(disp, shift int) reg.VecVirtual {
		w := GP64()
		MOVL(Mem{Base: p, Disp: disp}, w.As32())
		lo, hi, t := GP64(), GP64(), GP64()
		MOVL(w.As32(), lo.As32())
		ANDL(U32(0x3f3f3f3f), lo.As32())
		MOVL(w2.As32(), hi.As32())
		if shift > 0 {
			SHRL(U8(shift), hi.As32())
		}
		ANDL(U32(0x0f0f0f0f), hi.As32())
		MOVL(w.As32(), t.As32())
		SHRL(U8(6), t.As32())
		ANDL(U32(0x03030303), t.As32())
		SHLL(U8(4), t.As32())
		ORL(t.As32(), hi.As32())
		SHLQ(U8(32), hi)
		ORQ(hi, lo)
		x := XMM()
		VMOVQ(lo, x)
		v := YMM()
		VPMOVZXBD(x, v)
		return v
	}
	var sc, mn reg.VecVirtual
	if scales {
		sc = pack(4, 0)
	}
	if mins {
		mn = pack(8, 4)
	}
	return sc, mn
}

// iq4Weights returns the 32 signed levels of the 16 code bytes at m: the
// low nibbles (values 0-15) in the low 128 bits, the high nibbles (16-31)
// in the high, each looked up in kv (kvalues_iq4nl in both halves) by one
// VPSHUFB.
func iq4Weights(m Mem, kv, m4 reg.VecVirtual) reg.VecVirtual {
	lo, hi := XMM(), XMM()
	VMOVDQU(m, lo)
	VPSRLW(U8(4), lo, hi)
	w := YMM()
	VINSERTI128(U8(1), hi, lo.AsY(), w)
	VPAND(m4, w, w)
	VPSHUFB(w, kv, w)
	return w
}

const iq4Sig = "func(blk *byte, q *int8, d *float32, nblk int, kv *int8) float32"

// IQ4_NL: 18-byte blocks of 32, d f16 @0, qs[16] @2: y[j] = d·kv[qs[j]&15],
// y[j+16] = d·kv[qs[j]>>4], kv the 16 int8 levels of kvalues_iq4nl (−127 …
// 113, so |w|·a pairs stay within VPMADDUBSW's int16). Eight blocks per
// iteration, their eight f16 scales gathered and converted in one vector
// and multiplied by the eight activation scales at once (a scalar chain
// per block was a quarter of the instructions); the last nblk%8 blocks
// one at a time.
func dotIQ4NL() {
	name := "dotIQ4NLQ8AVX2"
	TEXT(name, NOSPLIT, iq4Sig)
	Doc(name + " is Σ decode(blk)[i]·(d[i/32]·q[i]) over nblk iq4_nl blocks, kv being kvalues_iq4nl; in integers per block.")
	p, q, d, n := Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64()), Load(Param("nblk"), GP64())
	kvp := Load(Param("kv"), GP64())
	kv := YMM()
	VBROADCASTI128(Mem{Base: kvp}, kv)
	m4 := emit.BroadcastByte(0x0f)
	ones := onesW()
	fs := AllocLocal(32) // d_w·d_a of the eight blocks
	acc := emit.Zeroed(2)
	dot := func(k int) reg.VecVirtual {
		w := iq4Weights(Mem{Base: p, Disp: 18*k + 2}, kv, m4)
		a := YMM()
		VMOVDQU(Mem{Base: q, Disp: 32 * k}, a)
		signedDot(w, a)
		VPMADDWD(ones, w, w)
		return w
	}
	groups := GP64()
	MOVQ(n, groups)
	SHRQ(U8(3), groups)
	emit.Loop("iq4nl", groups, func() {
		prefetchLines(p, 144)
		h := XMM()
		VPXOR(h, h, h)
		for k := range 8 {
			VPINSRW(U8(k), Mem{Base: p, Disp: 18 * k}, h, h)
		}
		sc := YMM()
		VCVTPH2PS(h, sc)
		VMULPS(Mem{Base: d}, sc, sc)
		VMOVUPS(sc, fs)
		for k := range 8 {
			scaleFMA(dot(k), fs.Offset(4*k), acc[k&1])
		}
		ADDQ(U32(144), p)
		ADDQ(U32(256), q)
		ADDQ(U32(32), d)
	})
	ANDQ(U32(7), n)
	emit.Loop("iq4nl_tail", n, func() {
		w := dot(0)
		s := emit.F16Scalar(Mem{Base: p})
		VMULSS(Mem{Base: d}, s, s)
		sy := YMM()
		VBROADCASTSS(s, sy)
		VCVTDQ2PS(w, w)
		VFMADD231PS(sy, w, acc[0])
		ADDQ(U32(18), p)
		ADDQ(U32(32), q)
		ADDQ(U32(4), d)
	})
	emit.Hsum(acc...)
}

// IQ4_XS: 136-byte blocks of 256: d f16 @0, scales_h u16 @2 (bits 2ib,
// 2ib+1: the high 2 bits of sub-block ib's scale), scales_l[4] @4 (nibble
// ib: its low 4 bits), qs[128] @8 (16 bytes per sub-block of 32, as
// IQ4_NL's): y = d·(ls−32)·kv[code]. Each sub-block is one activation block.
func dotIQ4XS() {
	name := "dotIQ4XSQ8AVX2"
	TEXT(name, NOSPLIT, iq4Sig)
	Doc(name + " is Σ decode(blk)[i]·(d[i/32]·q[i]) over nblk iq4_xs blocks, kv being kvalues_iq4nl; in integers per 32 values.")
	p, q, d, n := Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64()), Load(Param("nblk"), GP64())
	kvp := Load(Param("kv"), GP64())
	kv := YMM()
	VBROADCASTI128(Mem{Base: kvp}, kv)
	m4 := emit.BroadcastByte(0x0f)
	ones := onesW()
	shifts := iq4xsShifts()
	fs := AllocLocal(32) // d_w·(ls_j−32)·d[j] for the block's 8 sub-blocks
	acc := emit.Zeroed(2)
	emit.Loop("iq4xs", n, func() {
		prefetchLines(p, 136)
		l := iq4xsScales(p, shifts)
		blockScales(l, Mem{Base: d}, fs)
		for ib := range 8 {
			w := iq4Weights(Mem{Base: p, Disp: 8 + 16*ib}, kv, m4)
			a := YMM()
			VMOVDQU(Mem{Base: q, Disp: 32 * ib}, a)
			signedDot(w, a)
			VPMADDWD(ones, w, w)
			scaleFMA(w, fs.Offset(4*ib), acc[ib&1])
		}
		ADDQ(U32(136), p)
		ADDQ(U32(256), q)
		ADDQ(U32(32), d)
	})
	emit.Hsum(acc...)
}

// iq4xsScales returns the iq4_xs block at p's 8 sub-block scales
// d_w·(ls_j−32) as float32 lanes, lane j built from
// (scales_l >> 4j) & 15 | ((scales_h >> 2j) & 3) << 4.
func iq4xsScales(p reg.Register, shifts Mem) reg.VecVirtual {
	l, h, c := YMM(), YMM(), YMM()
	VPBROADCASTD(Mem{Base: p, Disp: 4}, l)
	VPSRLVD(shifts, l, l)
	VPBROADCASTD(shifts.Offset(64), c) // 15
	VPAND(c, l, l)
	VPBROADCASTD(Mem{Base: p, Disp: 2}, h)
	VPSRLVD(shifts.Offset(32), h, h)
	VPBROADCASTD(shifts.Offset(68), c) // 3
	VPAND(c, h, h)
	VPSLLD(U8(4), h, h)
	VPOR(h, l, l)
	VPBROADCASTD(shifts.Offset(72), c) // 32
	VPSUBD(c, l, l)
	VCVTDQ2PS(l, l)
	dw := emit.F16Scalar(Mem{Base: p})
	dwy := YMM()
	VBROADCASTSS(dw, dwy)
	VMULPS(dwy, l, l)
	return l
}

// iq4xsShifts are the per-lane shift counts of the 8 sub-blocks' scale
// bits: 4j (scales_l's nibbles) then 2j (scales_h's pairs).
// and then the masks 15, 3 and the offset 32 (broadcast from here).
// Declared once, on the first kernel's call.
func iq4xsShifts() Mem {
	if iq4xsShiftsSym != nil {
		return *iq4xsShiftsSym
	}
	m := GLOBL("iq4xsShifts", RODATA|NOPTR)
	iq4xsShiftsSym = &m
	for j := range 8 {
		DATA(4*j, U32(uint32(4*j)))
	}
	for j := range 8 {
		DATA(32+4*j, U32(uint32(2*j)))
	}
	DATA(64, U32(15))
	DATA(68, U32(3))
	DATA(72, U32(32))
	return m
}

var iq4xsShiftsSym *Mem

const iq4x4Sig = "func(blk *byte, q *int8, d *float32, qstride, dstride, nblk int, out *[4]float32, kv *int8)"

// act8Row4 are the four activation rows' addresses at q and d (row r at
// r·qstride, r·dstride bytes; q3, d3 three strides) plus disp bytes.
func act8Row4(q, d, qs, ds, q3, d3 reg.Register, r, qdisp, ddisp int) (Mem, Mem) {
	switch r {
	case 1:
		return Mem{Base: q, Index: qs, Scale: 1, Disp: qdisp}, Mem{Base: d, Index: ds, Scale: 1, Disp: ddisp}
	case 2:
		return Mem{Base: q, Index: qs, Scale: 2, Disp: qdisp}, Mem{Base: d, Index: ds, Scale: 2, Disp: ddisp}
	case 3:
		return Mem{Base: q, Index: q3, Scale: 1, Disp: qdisp}, Mem{Base: d, Index: d3, Scale: 1, Disp: ddisp}
	}
	return Mem{Base: q, Disp: qdisp}, Mem{Base: d, Disp: ddisp}
}

// storeFrameOut is storeOut of the rows float accumulators kept in the
// frame at accm (32 bytes a row), as the kernels whose rows do not fit the
// registers keep them.
func storeFrameOut(accm Mem, rows int) {
	acc := make([]reg.VecVirtual, rows)
	for r := range acc {
		acc[r] = YMM()
		VMOVUPS(accm.Offset(32*r), acc[r])
	}
	storeOut(acc)
}

// storeOut writes the accumulators' sums to out[0..len(acc)).
func storeOut(acc []reg.VecVirtual) {
	out := Load(Param("out"), GP64())
	for r := range acc {
		lo := emit.HsumX(acc[r])
		VMOVSS(lo, Mem{Base: out, Disp: 4 * r})
	}
	VZEROUPPER()
	RET()
}

// dotIQ4NLx4: dotIQ4NL for four activation rows (blocks32), each block's 32 levels
// looked up and their magnitudes taken once for the four (prefill's trunk
// rows); eight blocks' scales converted at once, as dotIQ4NL.
func dotIQ4NLx4() {
	name := "dotIQ4NLQ8x4AVX2"
	TEXT(name, NOSPLIT, iq4x4Sig)
	Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk iq4_nl blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride bytes.")
	a := load32(4)
	kvp := Load(Param("kv"), GP64())
	kv := YMM()
	VBROADCASTI128(Mem{Base: kvp}, kv)
	m4 := emit.BroadcastByte(0x0f)
	blocks32("iq4nlx4", a, 18, func(k int) reg.VecVirtual {
		return iq4Weights(Mem{Base: a.p, Disp: 18*k + 2}, kv, m4)
	})
}

// dotIQ4XSx4: dotIQ4XS for four activation rows: the super-block's scales
// built once, then each sub-block's levels looked up once for the four.
func dotIQ4XSx4() {
	name := "dotIQ4XSQ8x4AVX2"
	TEXT(name, NOSPLIT, iq4x4Sig)
	Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk iq4_xs blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride bytes.")
	p, q, d := Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64())
	qs, ds, n := Load(Param("qstride"), GP64()), Load(Param("dstride"), GP64()), Load(Param("nblk"), GP64())
	kvp := Load(Param("kv"), GP64())
	kv := YMM()
	VBROADCASTI128(Mem{Base: kvp}, kv)
	m4 := emit.BroadcastByte(0x0f)
	ones := onesW()
	shifts := iq4xsShifts()
	fs := AllocLocal(4 * 32) // per row r: d_w·(ls_j−32)·d_r[j], j < 8
	acc := emit.Zeroed(4)
	q3, d3 := GP64(), GP64()
	LEAQ(Mem{Base: qs, Index: qs, Scale: 2}, q3)
	LEAQ(Mem{Base: ds, Index: ds, Scale: 2}, d3)
	emit.Loop("iq4xsx4", n, func() {
		prefetchLines(p, 136)
		l := iq4xsScales(p, shifts)
		for r := range 4 {
			_, dm := act8Row4(q, d, qs, ds, q3, d3, r, 0, 0)
			blockScales(l, dm, fs.Offset(32*r))
		}
		for ib := range 8 {
			w := iq4Weights(Mem{Base: p, Disp: 8 + 16*ib}, kv, m4)
			aw := YMM()
			VPSIGNB(w, w, aw)
			for r := range 4 {
				qm, _ := act8Row4(q, d, qs, ds, q3, d3, r, 32*ib, 0)
				a := YMM()
				VMOVDQU(qm, a)
				VPSIGNB(w, a, a)
				VPMADDUBSW(a, aw, a)
				VPMADDWD(ones, a, a)
				scaleFMA(a, fs.Offset(32*r+4*ib), acc[r])
			}
		}
		ADDQ(U32(136), p)
		ADDQ(U32(256), q)
		ADDQ(U32(32), d)
	})
	storeOut(acc)
}

// sumsArgs are the loaded parameters of an integer dot whose activation
// brings per-block sums beside its scales (the k-quants' and the legacy
// formats' offsets meet them in float): the weights, levels, scales and
// sums, the four-row kernel's strides and their triples, and the block
// count. A one-row kernel runs over rows weight rows in one call (rowp
// and row: the next row's address and index, on the stack): beginRow
// (re)loads the pointers for each, endRow stores its sum and loops.
type sumsArgs struct {
	p, q, d, sums     reg.Register
	qs, ds, q3, d3, n reg.Register
	rs                rowSet   // four or eight rows
	rows              *rowLoop // nil for four or eight rows
}

// rowLoop runs a one-row kernel over a run of weight rows (rowsParams):
// the next row's address and index live on the stack; each row reloads
// the parameters the block loop consumes (reload) and sets p to the row.
type rowLoop struct {
	name      string
	p         reg.Register
	rowp, row Mem
	reload    []rowParam
}

// rowParam is a parameter a row reloads into its register.
type rowParam struct {
	name string
	r    reg.Register
}

// startRows begins a rows kernel after its TEXT: no rows returns 0 at
// once; the constants the emitter sets up next come before beginRow.
func startRows(name string, p reg.Register, reload ...rowParam) *rowLoop {
	Pragma("noescape")
	loc := AllocLocal(16)
	l := &rowLoop{name: name, p: p, rowp: loc, row: loc.Offset(8), reload: reload}
	t := GP64()
	Load(Param("rows"), t)
	TESTQ(t, t)
	JZ(LabelRef(name + "_none"))
	Load(Param("blk"), t)
	MOVQ(t, l.rowp)
	MOVQ(U32(0), l.row)
	return l
}

// beginRow starts the next weight row: p at it, the reloaded parameters
// afresh. The accumulators' zeroing belongs after it.
func (l *rowLoop) beginRow() {
	Label(l.name + "_row")
	MOVQ(l.rowp, l.p)
	for _, r := range l.reload {
		Load(Param(r.name), r.r)
	}
}

// endRow finishes a row: the accumulators' sum is the result and (out
// non-nil) out[row]; then the next row while there is one.
func (l *rowLoop) endRow(acc []reg.VecVirtual) {
	lo := emit.HsumX(emit.AddTree(acc...))
	Store(lo, ReturnIndex(0))
	out, i, t := GP64(), GP64(), GP64()
	MOVQ(l.row, i)
	Load(Param("out"), out)
	TESTQ(out, out)
	JZ(LabelRef(l.name + "_stored"))
	VMOVSS(lo, Mem{Base: out, Index: i, Scale: 4})
	Label(l.name + "_stored")
	INCQ(i)
	MOVQ(i, l.row)
	Load(Param("stride"), t)
	ADDQ(t, l.rowp)
	Load(Param("rows"), t)
	CMPQ(i, t)
	JB(LabelRef(l.name + "_row"))
	VZEROUPPER()
	RET()
	Label(l.name + "_none")
	z := XMM()
	VXORPS(z, z, z)
	Store(z, ReturnIndex(0))
	RET()
}

// The one-row kernels' rows parameters: weight row i at blk + i·stride,
// its dot with the activation into out[i] (out nil: none stored), i <
// rows; the result is the last row's dot (0 for no rows).
const rowsParams = "blk *byte, stride int, q *int8, d *float32, %s *float32, nblk int, out *float32, rows int"

// rowsParamsG is rowsParams with the activation's integer sums (Act8.G).
const rowsParamsG = "blk *byte, stride int, q *int8, d *float32, %s *int16, nblk int, out *float32, rows int"

// sumsPrologue starts format's one-row (rows 1), two-, four- or eight-row
// kernel: its TEXT with sig1 or sig4 (two or eight rows: sig4 with an out
// of two or eight), its Doc (doc1 or doc4 after the name and what every such kernel
// computes over nblk desc blocks), and the parameters, the sums named
// sums. The one-row kernel's sig1 is rowsSig's: it runs over a run of
// weight rows (beginRow, endRow).
func sumsPrologue(format, desc string, rows int, sig1, sig4, sums, doc1, doc4 string) sumsArgs {
	name := fmt.Sprintf("dot%sQ8AVX2", format)
	if rows == 1 {
		TEXT(name, NOSPLIT, sig1)
		Doc(name+" sets out[i] (out non-nil) to Σ decode(blk + i·stride)[j]·(d[j/32]·q[j]) over nblk "+desc+" blocks",
			"for i < rows, and returns the last (a run of weight rows with one activation row in one call), "+doc1)
	} else {
		name = fmt.Sprintf("dot%sQ8x%dAVX2", format, rows)
		TEXT(name, NOSPLIT, strings.Replace(sig4, "*[4]float32", fmt.Sprintf("*[%d]float32", rows), 1))
		Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk " + desc + " blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride, " + doc4)
	}
	var a sumsArgs
	if rows == 1 {
		a.p, a.q, a.d, a.sums, a.n = GP64(), GP64(), GP64(), GP64(), GP64()
		a.rows = startRows(name, a.p, rowParam{"q", a.q}, rowParam{"d", a.d}, rowParam{sums, a.sums}, rowParam{"nblk", a.n})
		return a
	}
	a.p, a.q, a.d, a.sums = Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64()), Load(Param(sums), GP64())
	a.qs, a.ds = Load(Param("qstride"), GP64()), Load(Param("dstride"), GP64())
	a.rs = newRowSet(rows, a.q, a.qs, a.ds)
	a.q3, a.d3 = a.rs.q3, a.rs.d3
	a.n = Load(Param("nblk"), GP64())
	return a
}

// level is row r's activation levels at byte disp.
func (a sumsArgs) level(r, disp int) Mem {
	if a.rows != nil {
		return Mem{Base: a.q, Disp: disp}
	}
	return a.rs.level(r, disp)
}

// each is rowSet.each, the one row's elements at the arrays' bases.
func (a sumsArgs) each(arrays []rowArray, body func(r int, m []Mem)) {
	if a.rows == nil {
		a.rs.each(arrays, body)
		return
	}
	m := make([]Mem, len(arrays))
	for i, x := range arrays {
		m[i] = Mem{Base: x.base}
	}
	body(0, m)
}

// advance moves the levels on by n bytes.
func (a sumsArgs) advance(n int) {
	ADDQ(U32(uint32(n)), a.q)
	if a.rows == nil {
		a.rs.advance(n)
	}
}

// beginRow starts a one-row kernel's next weight row (nothing for four
// rows).
func (a sumsArgs) beginRow() {
	if a.rows != nil {
		a.rows.beginRow()
	}
}

// endRow finishes a row (a four-row kernel: its four sums into out).
func (a sumsArgs) endRow(acc []reg.VecVirtual) {
	if a.rows == nil {
		storeOut(acc)
		return
	}
	a.rows.endRow(acc)
}
