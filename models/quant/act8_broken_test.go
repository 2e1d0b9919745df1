package quant

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/strata-llm/strata/internal/asmcheck"
)

// brokenAct8Kernels are deliberate faults in the integer kernels'
// generator (asm/act8), each an edit of one line: a scale from the wrong
// nibble, a level from the wrong bit, a row's sums from the wrong address.
// Each fault names the failures the act8 tests must then report.
var brokenAct8Kernels = []struct {
	what, file, from, to string
	want                 []string // substrings of the failing tests' output
}{
	{
		what: "q2_k: the mins' nibble taken as the scales",
		file: "kquants.go", from: "VPMOVZXBW(sc, words)", to: "VPMOVZXBW(mn, words)",
		want: []string{"q2_k ggml-quantized, one row", "q2_k ggml-quantized, four rows", "q2_k four rows", "q2_k random"},
	},
	{
		what: "q2_k one row: the offsets weigh the sums per 16 by the scales, not the mins",
		file: "kquants.go", from: "k16Scales{words: words, offWords: mins,", to: "k16Scales{words: words, offWords: words,",
		want: []string{"q2_k ggml-quantized, one row", "q2_k ggml-decoded random, a run of rows (row 2)", "q2_k random"},
	},
	{
		what: "k16 one row: the integer sums per 16 read at the float sums' stride",
		file: "kquants.go", from: "ADDQ(U32(32), h)", to: "ADDQ(U32(64), h)",
		want: []string{"q2_k ggml-quantized, one row", "q3_k ggml-quantized, a run of rows (row 1)", "q6_k ggml-quantized, one row"},
	},
	{
		what: "activation quantizer: the integer sums per 16 stored swapped",
		file: "quantize.go", from: "MOVW(gi.As16(), Mem{Base: gp, Disp: 2 * i})", to: "MOVW(gi.As16(), Mem{Base: gp, Disp: 2 - 2*i})",
		want: []string{"integer sums per 16 G[0]", "q6_k ggml-quantized, one row"},
	},
	{
		what: "q3_k: each block takes its neighbour's high bits",
		file: "kquants.go", from: "bitTo(hm, blk, 2, c4)", to: "bitTo(hm, blk^1, 2, c4)",
		want: []string{"q3_k ggml-quantized, one row", "q3_k ggml-quantized, four rows", "q3_k four rows", "q3_k random"},
	},
	{
		what: "four rows: row 3 of the k16 kernels reads row 1's sums per 16",
		file: "rows4.go", from: "return Mem{Base: a.base, Index: s.d3, Scale: 2}", to: "return Mem{Base: a.base, Index: s.ds, Scale: 2}",
		want: []string{"q2_k ggml-quantized, four rows (row 3)", "q3_k ggml-quantized, four rows (row 3)", "q6_k ggml-quantized, four rows (row 3)"},
	},
	{
		what: "q5_k: each sub-block takes its neighbour's fifth bits",
		file: "kquants.go", from: "bitTo(qh, sb, 4, c16)", to: "bitTo(qh, sb^1, 4, c16)",
		want: []string{"q5_k ggml-quantized, one row", "q5_k ggml-quantized, four rows", "q5_k four rows", "q5_k random"},
	},
	{
		what: "q4_0: levels offset by 16, not 8",
		file: "legacy.go", from: "size: 18, minAt: -1, qhAt: -1, qsAt: 2, bias: 8}", to: "size: 18, minAt: -1, qhAt: -1, qsAt: 2, bias: 16}",
		want: []string{"q4_0 ggml-quantized, one row", "q4_0 ggml-quantized, four rows", "q4_0 four rows", "q4_0 random"},
	},
	{
		what: "q4_1: the scale taken as the min",
		file: "legacy.go", from: "size: 20, minAt: 2,", to: "size: 20, minAt: 0,",
		want: []string{"q4_1 ggml-quantized, one row", "q4_1 ggml-quantized, four rows", "q4_1 four rows", "q4_1 random"},
	},
	{
		what: "q5_0: the fifth bits from qh's next byte on",
		file: "legacy.go", from: "size: 22, minAt: -1, qhAt: 2,", to: "size: 22, minAt: -1, qhAt: 3,",
		want: []string{"q5_0 ggml-quantized, one row", "q5_0 ggml-quantized, four rows", "q5_0 four rows", "q5_0 random"},
	},
	{
		what: "q5_1: the fifth bits from qh's next byte on",
		file: "legacy.go", from: "size: 24, minAt: 2, qhAt: 4,", to: "size: 24, minAt: 2, qhAt: 5,",
		want: []string{"q5_1 ggml-quantized, one row", "q5_1 ggml-quantized, four rows", "q5_1 four rows", "q5_1 random"},
	},
	{
		what: "legacy formats: the tail blocks' offsets dropped",
		file: "legacy.go", from: "VADDPS(t.AsY(), accOf(r, 0), accOf(r, 0))", to: "VADDPS(t.AsY(), t.AsY(), t.AsY())",
		want: []string{"q4_1 ggml-quantized prefix, one row", "q5_0 ggml-quantized prefix, four rows (row 2)", "q4_0 random"},
	},
	{
		what: "four and eight rows: the k32 kernels' mins meet row 0's sums in every row",
		file: "kquants.go", from: "VFNMADD231PS(m[1], mnf, accOf(r, 3))", to: "VFNMADD231PS(Mem{Base: s}, mnf, accOf(r, 3))",
		want: []string{"q5_k ggml-quantized, four rows (row 1)", "q5_k ggml-quantized, four rows (row 3)", "q4_k ggml-quantized, four rows (row 2)",
			"q4_k ggml-quantized, eight rows (row 6)", "q5_k ggml-decoded random, eight rows (row 1)"},
	},
	{
		what: "q4_k: each sub-block takes its neighbour's nibbles",
		file: "kquants.go", from: "16 + 32*(sb/2)}, sb%2, m4)", to: "16 + 32*(sb/2)}, 1-sb%2, m4)",
		want: []string{"q4_k ggml-quantized, one row", "q4_k ggml-quantized, four rows", "q4_k four rows", "q4_k random"},
	},
	{
		what: "q8_0, iq4_nl four and eight rows: every row's eight blocks scaled by row 0's",
		file: "rows4.go", from: "blockScales(dw, m[0], fs.Offset(32*r))", to: "blockScales(dw, Mem{Base: d}, fs.Offset(32*r))",
		want: []string{"q8_0 ggml-quantized, four rows (row 1)", "iq4_nl ggml-quantized, four rows (row 2)", "q8_0 four rows",
			"q8_0 ggml-quantized, eight rows (row 5)", "q8_0 eight rows"},
	},
	{
		what: "eight rows: rows 4-7 read two strides on, not four (q8_0, q4_k, q5_k)",
		file: "rows4.go", from: "LEAQ(Mem{Base: q, Index: qs, Scale: 4}, s.q4)", to: "LEAQ(Mem{Base: q, Index: qs, Scale: 2}, s.q4)",
		want: []string{"q8_0 ggml-quantized, eight rows (row 4)", "q4_k ggml-quantized, eight rows (row 5)", "q5_k ggml-decoded random, eight rows (row 7)",
			"q8_0 eight rows", "q4_k eight rows"},
	},
	{
		what: "eight rows: rows 4-7 keep their first levels block after block",
		file: "rows4.go", from: "ADDQ(U32(uint32(n)), s.q4)", to: "ADDQ(U32(0), s.q4)",
		want: []string{"q8_0 ggml-quantized, eight rows (row 6)", "q8_0 ggml-quantized prefix, eight rows (row 4)", "q4_k ggml-quantized, eight rows (row 7)",
			"q5_k ggml-quantized, eight rows (row 5)"},
	},
	{
		what: "two, four and eight rows: the rows' scales and sums at the levels' stride",
		file: "rows4.go", from: "s := rowSet{rows: rows, q: q, qs: qs, ds: ds}", to: "s := rowSet{rows: rows, q: q, qs: qs, ds: qs}",
		want: []string{"q8_0 ggml-quantized, two rows (row 1)", "q4_k ggml-quantized, two rows (row 1)", "q5_k ggml-decoded random, two rows (row 1)",
			"q4_k ggml-quantized, four rows (row 2)", "q8_0 ggml-quantized, eight rows (row 6)", "q5_k two rows"},
	},
	{
		what: "eight rows: every row's scales and sums from row 0's",
		file: "rows4.go", from: "ADDQ(s.ds, cur[i])", to: "ADDQ(U32(0), cur[i])",
		want: []string{"q8_0 ggml-quantized, eight rows (row 3)", "q4_k ggml-quantized, eight rows (row 6)", "q5_k ggml-decoded random, eight rows (row 1)",
			"q4_k eight rows"},
	},
	{
		what: "q8_0, iq4_nl four rows: the tail blocks read at a wrong stride",
		file: "rows4.go", from: "ADDQ(U32(uint32(size)), p)", to: "ADDQ(U32(uint32(size+2)), p)",
		want: []string{"q8_0 ggml-quantized prefix, four rows (row 0)", "iq4_nl ggml-quantized prefix, four rows (row 3)"},
	},
	{
		what: "activation quantizer: levels rounded toward zero",
		file: "quantize.go", from: "VORPS(half, hs, hs) // ±0.5 with f's sign", to: "VANDPS(half, hs, hs)",
		want: []string{"Q[1] = -63, want -64"},
	},
	{
		what: "activation quantizer: the first 16's sum counts values 0-7 twice",
		file: "quantize.go", from: "VPADDD(v[1], v[0], s0)", to: "VPADDD(v[0], v[0], s0)",
		want: []string{"want H[1] =", "q4_k random"},
	},
	{
		what: "q6_k: the first 32 of each 128 take the second's high bits",
		file: "../emit/emit.go", from: "VPSLLW(U8(4), qh, h)", to: "VPSLLW(U8(2), qh, h)",
		want: []string{"q6_k ggml-quantized, one row", "q6_k ggml-quantized, a run of rows (row 1)", "q6_k ggml-quantized, four rows (row 0)",
			"q6_k ggml-quantized prefix, four rows (row 3)", "q6_k four rows", "q6_k random"},
	},
	{
		what: "q6_k: the levels offset by 16, not 32",
		file: "rows4.go", from: "MOVL(U32(0x42000000), t) // 32.0", to: "MOVL(U32(0x41800000), t)",
		want: []string{"q6_k ggml-quantized, one row", "q6_k ggml-quantized, four rows (row 1)", "q6_k ggml-decoded random, four rows (row 2)",
			"q6_k four rows", "q6_k random"},
	},
	{
		what: "one-row kernels: every row of a run reads the run's first row",
		file: "gen.go", from: "ADDQ(t, l.rowp)", to: "ADDQ(U32(0), l.rowp)",
		want: []string{"q6_k ggml-quantized, a run of rows (row 1)", "q2_k ggml-decoded random, a run of rows (row 1)",
			"q4_k ggml-quantized, a run of rows (row 1)", "q5_1 ggml-quantized prefix, a run of rows (row 1)",
			"q8_0 ggml-quantized, a run of rows (row 1)"},
	},
	{
		what: "one-row kernels: each row of a run stores over the first's result",
		file: "gen.go", from: "VMOVSS(lo, Mem{Base: out, Index: i, Scale: 4})", to: "VMOVSS(lo, Mem{Base: out})",
		want: []string{"q3_k ggml-quantized, a run of rows (row 1)", "q5_k ggml-decoded random, a run of rows (row 2)",
			"q4_0 ggml-quantized, a run of rows (row 1)", "q8_0 ggml-decoded random, a run of rows (row 2)"},
	},
	{
		what: "iq2_xs one row: each 32 takes its neighbour's scales",
		file: "rows4.go", from: "VPSHUFB(masks.Offset(32*blk), sv, scy)", to: "VPSHUFB(masks.Offset(32*(blk^1)), sv, scy)",
		want: []string{"iq2_xs ggml-quantized, one row", "iq2_xs random"},
	},
	{
		what: "iq2_xs four rows: each 32 takes its neighbour's scales",
		file: "rows4.go", from: "VPSHUFB(masks.Offset(32*blk), sv, sc)", to: "VPSHUFB(masks.Offset(32*(blk^1)), sv, sc)",
		want: []string{"iq2_xs ggml-quantized, four rows (row 0)", "iq2_xs four rows"},
	},
	{
		what: "iq2_xs four rows: the weights' signs not carried to the activations",
		file: "rows4.go", from: "VPSIGNB(sy, a, a)", to: "VPSIGNB(gy, a, a)",
		want: []string{"iq2_xs ggml-quantized, four rows (row 0)", "iq2_xs ggml-decoded random, four rows (row 3)", "iq2_xs four rows"},
	},
	{
		what: "iq2_xs four rows: the grid index loses its top bit",
		file: "rows4.go", from: "ANDL(U32(511), gi.As32())", to: "ANDL(U32(255), gi.As32())",
		want: []string{"iq2_xs ggml-quantized, four rows (row 1)", "iq2_xs four rows"},
	},
	{
		what: "iq2_xs four rows: the sign index shifted one bit too far",
		file: "rows4.go", from: "SHRL(U8(9), v.As32())", to: "SHRL(U8(10), v.As32())",
		want: []string{"iq2_xs ggml-quantized, four rows (row 2)", "iq2_xs four rows"},
	},
	{
		what: "iq2_xxs: the scales from the index words",
		file: "iq.go", from: "VSHUFPS(U8(0xdd), s, a, s)", to: "VSHUFPS(U8(0x88), s, a, s)",
		want: iqWant("iq2_xxs"),
	},
	{
		what: "iq2_xxs and iq3_xxs: the sign indices taken 6 bits apart",
		file: "iq.go", from: "SHRL(U8(7*l), i.As32())", to: "SHRL(U8(6*l), i.As32())",
		want: append(iqWant("iq2_xxs"), iqWant("iq3_xxs")...),
	},
	{
		what: "iq3_xxs: each 32's scale from the previous word",
		file: "iq.go", from: "VMOVDQU(Mem{Base: p, Disp: 66}, s)", to: "VMOVDQU(Mem{Base: p, Disp: 62}, s)",
		want: iqWant("iq3_xxs"),
	},
	{
		what: "iq2_xs two and eight rows: the grid index loses its top bit",
		file: "iq.go", from: "ANDL(U32(511), i.As32())", to: "ANDL(U32(255), i.As32())",
		want: []string{"iq2_xs ggml-quantized prefix, eight rows", "iq2_xs ggml-decoded random, two rows", "iq2_xs eight rows"},
	},
	{
		what: "iq2_xs two and eight rows: the sign index shifted one bit short",
		file: "iq.go", from: "SHRL(U8(9), i.As32())", to: "SHRL(U8(8), i.As32())",
		want: []string{"iq2_xs ggml-quantized prefix, two rows", "iq2_xs ggml-decoded random, eight rows", "iq2_xs eight rows"},
	},
	{
		what: "iq2_xs two and eight rows: the scales one byte early",
		file: "iq.go", from: "nibbles16(Mem{Base: p, Disp: 66})", to: "nibbles16(Mem{Base: p, Disp: 65})",
		want: []string{"iq2_xs ggml-quantized prefix, two rows", "iq2_xs ggml-quantized prefix, eight rows", "iq2_xs eight rows"},
	},
	{
		what: "iq2_s: the high index bits of the last two 8s swapped",
		file: "iq.go", from: "shifts: []uint32{0, 2, 4, 6}, mask: 0x300}", to: "shifts: []uint32{0, 2, 6, 4}, mask: 0x300}",
		want: iqWant("iq2_s"),
	},
	{
		what: "iq3_s: the sign bytes one byte early",
		file: "iq.go", from: "signBits(Mem{Base: p, Disp: 74 + 4*ib})", to: "signBits(Mem{Base: p, Disp: 73 + 4*ib})",
		want: iqWant("iq3_s"),
	},
	{
		what: "iq1_s: the shift's sign from bit 14",
		file: "iq.go", from: "func(int) byte { return 0x80 })", to: "func(int) byte { return 0x40 })",
		want: iqWant("iq1_s"),
	},
	{
		what: "iq1_m: the second 128 values take the first's scales",
		file: "iq.go", from: "return byte(2*(i/8) + i%2)", to: "return byte(2*(i/8%2) + i%2)",
		want: iqWant("iq1_m"),
	},
	{
		what: "IQ formats with a scale per 32: 2s−1 for 2s+1",
		file: "iq.go", from: "VPSUBD(iqMinusOne(), l, l) // 2s+1", to: "VPADDD(iqMinusOne(), l, l) // 2s+1",
		want: []string{"iq2_xxs ggml-quantized, one row", "iq3_s ggml-quantized, four rows (row 2)", "iq1_s random"},
	},
	{
		what: "IQ formats with a scale per 16: 2s−1 for 2s+1",
		file: "iq.go", from: "VPSUBB(iqMinusOne().AsX(), sc, sc) // 2s+1", to: "VPADDB(iqMinusOne().AsX(), sc, sc) // 2s+1",
		want: []string{"iq2_s ggml-quantized, one row", "iq1_m ggml-quantized, four rows (row 1)", "iq2_s four rows"},
	},
	{
		what: "IQ two and four rows: every row's scales stored over row 0's",
		file: "iq.go", from: "blockScales(dwy, dm, fs.Offset(32*r))", to: "blockScales(dwy, dm, fs.Offset(0))",
		want: []string{"iq3_xxs ggml-quantized, four rows (row 1)", "iq1_m ggml-quantized, four rows (row 2)", "iq2_s four rows",
			"iq2_xxs ggml-quantized, two rows (row 1)", "iq3_s two rows"},
	},
	{
		what: "IQ eight rows: rows 4-7 read two strides on, not four",
		file: "iq.go", from: "LEAQ(Mem{Base: q, Index: qs, Scale: 4}, r4)", to: "LEAQ(Mem{Base: q, Index: qs, Scale: 2}, r4)",
		want: []string{"iq2_xxs ggml-quantized, eight rows (row 5)", "iq3_xxs ggml-decoded random, eight rows (row 4)", "iq2_xxs eight rows", "iq3_xxs eight rows"},
	},
	{
		what: "IQ eight rows: every row's scales from row 0's",
		file: "iq.go", from: "ADDQ(ds, dr)", to: "ADDQ(U32(0), dr)",
		want: []string{"iq2_xxs ggml-quantized, eight rows (row 6)", "iq3_xxs ggml-quantized, eight rows (row 7)", "iq3_xxs eight rows"},
	},
	{
		what: "IQ eight rows: the weights' +64 taken back with row 0's sums",
		file: "iq.go", from: "ADDQ(ds, sr)", to: "ADDQ(U32(0), sr)",
		want: []string{"iq2_xxs ggml-quantized, eight rows (row 1)", "iq3_xxs ggml-decoded random, eight rows (row 5)", "iq2_xxs eight rows"},
	},
	{
		what: "IQ eight rows: the weights' +64 taken back with the scales, not the sums",
		file: "iq.go", from: "VFNMADD231PS(Mem{Base: sr, Disp: 32 * k}, o, acc[r])", to: "VFNMADD231PS(Mem{Base: dr, Disp: 32 * k}, o, acc[r])",
		want: []string{"iq2_xxs ggml-quantized, eight rows (row 0)", "iq3_xxs ggml-quantized, eight rows (row 3)", "iq3_s eight rows",
			"iq1_m ggml-quantized, eight rows (row 1)", "iq2_s eight rows"},
	},
	{
		what: "IQ eight rows, a scale per 16: the rows' sums per 16 read at the scales' stride",
		file: "iq.go", from: `Act8.H)", 2`, to: `Act8.H)", 1`,
		want: []string{"iq2_s ggml-quantized, eight rows (row 2)", "iq1_m ggml-decoded random, eight rows (row 5)", "iq2_s eight rows"},
	},
	{
		what: "IQ rows with a scale per 256: each 32 takes its neighbour's integer scale",
		file: "iq.go", from: "VPBROADCASTD(scl.Offset(4*ib), sc)", to: "VPBROADCASTD(scl.Offset(4*(ib^1)), sc)",
		want: []string{"iq2_xxs ggml-quantized, eight rows, a scale per 256 (row 0)", "iq3_xxs ggml-decoded random, eight rows, a scale per 256 (row 5)",
			"iq3_s ggml-quantized, eight rows, a scale per 256 (row 7)", "iq1_s eight rows, a scale per 256",
			"iq2_xxs ggml-quantized, four rows, a scale per 256 (row 2)", "iq3_xxs ggml-decoded random, two rows, a scale per 256 (row 1)",
			"iq1_s four rows, a scale per 256", "iq3_s two rows, a scale per 256"},
	},
	{
		what: "IQ rows with a scale per 256: every row's scale from row 0's",
		file: "iq.go", from: "ADDQ(ds, dk)", to: "ADDQ(U32(0), dk)",
		want: []string{"iq2_xxs ggml-quantized, eight rows, a scale per 256 (row 3)", "iq3_xxs eight rows, a scale per 256",
			"iq2_xxs ggml-quantized, four rows, a scale per 256 (row 1)", "iq3_xxs ggml-quantized, two rows, a scale per 256 (row 1)"},
	},
	{
		what: "IQ rows with a scale per 256: the weights' +64 taken back with row 0's sums",
		file: "iq.go", from: "ADDQ(ds, sk)", to: "ADDQ(U32(0), sk)",
		want: []string{"iq2_xxs ggml-quantized, eight rows, a scale per 256 (row 1)", "iq1_s ggml-decoded random, eight rows, a scale per 256 (row 6)"},
	},
	{
		what: "IQ rows with a scale per 256: the 32s' integer sums subtracted",
		file: "iq.go", from: "VPADDD(x, iacc[r], iacc[r])", to: "VPSUBD(x, iacc[r], iacc[r])",
		want: []string{"iq2_xxs ggml-quantized, eight rows, a scale per 256 (row 2)", "iq3_xxs ggml-quantized prefix, eight rows, a scale per 256 (row 4)",
			"iq3_s eight rows, a scale per 256"},
	},
	{
		what: "q4_k, q5_k rows with a scale per 256: each sub-block takes its neighbour's integer scale",
		file: "kquants.go", from: "VPBROADCASTD(scl.Offset(4*sb), bc)", to: "VPBROADCASTD(scl.Offset(4*(sb^1)), bc)",
		want: []string{"q4_k ggml-quantized, eight rows, a scale per 256 (row 0)", "q5_k ggml-decoded random, eight rows, a scale per 256 (row 3)",
			"q4_k eight rows, a scale per 256", "q5_k ggml-quantized prefix, eight rows, a scale per 256 (row 7)",
			"q4_k ggml-quantized, four rows, a scale per 256 (row 3)", "q5_k ggml-quantized, two rows, a scale per 256 (row 0)", "q4_k two rows, a scale per 256"},
	},
	{
		what: "q4_k, q5_k rows with a scale per 256: the mins meet the scales, not the sums",
		file: "kquants.go", from: "VFNMADD231PS(m[1], mn, a)", to: "VFNMADD231PS(m[0], mn, a)",
		want: []string{"q4_k ggml-quantized, eight rows, a scale per 256 (row 2)", "q5_k eight rows, a scale per 256",
			"q4_k ggml-quantized, four rows, a scale per 256 (row 1)", "q5_k four rows, a scale per 256"},
	},
	{
		what: "q4_k, q5_k rows with a scale per 256: the mins taken as the scales",
		file: "kquants.go", from: "_, mn := q4kScaleInts(p, false, true)", to: "mn, _ := q4kScaleInts(p, true, false)",
		want: []string{"q4_k ggml-quantized, eight rows, a scale per 256 (row 5)", "q5_k ggml-decoded random, eight rows, a scale per 256 (row 1)"},
	},
	{
		what: "activation quantizer, a scale per 256: the max of the first 128 values",
		file: "quantize.go", from: "for i := range 32 {", to: "for i := range 16 {",
		want: []string{"D[0] = ", "max of 256"},
	},
	{
		what: "activation quantizer, a scale per 256: the given max replaced by 1",
		file: "quantize.go", from: `Load(Param("amax"), bits)`, to: `Load(Param("amax"), bits); MOVL(U32(0x3f800000), bits)`,
		want: []string{"max bits", "Q[40] = "},
	},
}

// iqWant are the failures a fault in one IQ format's kernels must show:
// ggml's blocks one row and four rows, random blocks one row and four.
func iqWant(name string) []string {
	return []string{name + " ggml-quantized, one row", name + " ggml-quantized, four rows", name + " four rows", name + " random"}
}

// TestAct8KernelsCatchBrokenKernels is the control for the act8 tests:
// with each fault of brokenAct8Kernels planted in the generator, the
// regenerated assembly (through go's -overlay, the tree untouched) fails
// TestAct8Kernels, TestAct8Rows, TestAct8GGMLBlocks and the quantizer's
// tests (TestAct8Quantize, TestAct8Quantize256, TestAct8QuantizeAssembly)
// where the fault says, one row and four rows.
func TestAct8KernelsCatchBrokenKernels(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator and the package once per fault (-short)")
	}
	if runtime.GOARCH != "amd64" || len(act8Dots) == 0 {
		t.Skip("no integer kernels here")
	}
	for _, fault := range brokenAct8Kernels {
		t.Run(fault.what, func(t *testing.T) {
			// Each fault is its own generator run and package build; two at a
			// time overlap one's link with the other's compile.
			t.Parallel()
			tmp := t.TempDir()
			path, broken := asmcheck.Plant(t, tmp, filepath.Join("asm/act8", fault.file), fault.from, fault.to)
			asm, regenerated := asmcheck.Regenerate(t, tmp, "asm/act8", map[string]string{path: broken}, "act8_amd64.s", "quant")
			asmcheck.MustFail(t, tmp, map[string]string{asm: regenerated},
				"^(TestAct8Kernels|TestAct8Rows|TestAct8GGMLBlocks|TestAct8Quantize|TestAct8Quantize256|TestAct8QuantizeAssembly)$", fault.want)
		})
	}
}
