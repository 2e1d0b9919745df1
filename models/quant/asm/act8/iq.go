package main

import (
	"fmt"
	"math"
	"strings"

	. "github.com/mmcloughlin/avo/build"
	. "github.com/mmcloughlin/avo/operand"
	"github.com/mmcloughlin/avo/reg"

	"github.com/strata-llm/strata/models/quant/asm/emit"
)

// iqGrid is an IQ format whose 256-value blocks pick their magnitudes
// from a grid by index (iq2_xxs, iq3_xxs, iq2_s, iq3_s, iq1_s, iq1_m, and
// iq2_xs's two- and eight-row kernels):
// y = d_w·mul·(2s+1)·w, s a scale code per 32 or per 16 values and w a
// grid point with its signs (or, for iq1, 8·grid ± 1 with mul folding
// the 1/8). Per activation block of 32 the kernel loads the 32 grid
// magnitudes u (scalar loads of the entries, their indices plain bytes or
// built in a vector with their high bits), builds their signs as ±1 bytes
// sg in vectors, and forms VPMADDUBSW(u, a·sg), then VPMADDWD by ones
// (a scale per 32, folded into the float factor) or by the two scales of
// its 16s (iq2_s, iq1_m). Every |w| ≤ 62 (iq3_xxs's largest magnitude), so
// VPMADDUBSW's pairs stay within int16 (2·62·127).
type iqGrid struct {
	name, desc string  // as in the kernel's name: dot<name>Q8AVX2; the format in the doc comment
	size       int     // bytes per block
	mul        float32 // the constant factor of d_w
	// d emits the block's d_w as float32 in the low lane; nil: the f16 at 0.
	d func(p reg.Register) reg.VecVirtual
	// scales32 emits the 8 scale codes s of the block's 32s as int32
	// lanes; scales16 (the formats with a scale per 16) its 16 codes as
	// bytes of an xmm, byte 2b the first 16 of activation block b.
	scales32, scales16 func(p reg.Register) reg.VecVirtual
	// weights returns, given the grid's register, the function emitting
	// activation block ib's 32 magnitudes u (unsigned bytes) and signs sg
	// (bytes whose sign is the weight's, never zero).
	weights func(grid reg.Register) func(p reg.Register, ib int) (u, sg reg.VecVirtual)
	// rows lists the kernels to emit by activation rows (nil: 1, 2, 4
	// and 8): a format whose other kernels are written apart names its own.
	rows []int
}

// iqConst is a read-only vector constant of the IQ kernels, declared once
// under name on first use.
func iqConst(name string, data []byte) Mem {
	if m, ok := iqConsts[name]; ok {
		return m
	}
	m := GLOBL(name, RODATA|NOPTR)
	for i, b := range data {
		DATA(i, U8(b))
	}
	iqConsts[name] = m
	return m
}

var iqConsts = map[string]Mem{}

// dwordsConst is iqConst of little-endian uint32s.
func dwordsConst(name string, v ...uint32) Mem {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = append(b, byte(x), byte(x>>8), byte(x>>16), byte(x>>24))
	}
	return iqConst(name, b)
}

// bytesOf is n bytes, byte i f(i).
func bytesOf(n int, f func(i int) byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = f(i)
	}
	return b
}

// vec is an xmm (n ≤ 4 lanes of 32 bits) or a ymm.
func vec(n int) reg.VecVirtual {
	if n <= 4 {
		return XMM()
	}
	return YMM()
}

// hiBits describes index bits spread over a field: per lane k,
// ((broadcast(m) << pre) >> shifts[k]) & mask, m being width bytes.
type hiBits struct {
	name   string // the constants' name
	m      Mem
	width  int
	pre    int
	shifts []uint32
	mask   uint32
}

// broadcastTo loads the width bytes at m into every lane of v.
func broadcastTo(m Mem, width int, v reg.VecVirtual) {
	switch width {
	case 1:
		VPBROADCASTB(m, v)
	case 2:
		VPBROADCASTW(m, v)
	default:
		VPBROADCASTD(m, v)
	}
}

// gridIndex returns the len(h.shifts) dword indices: the zero-extended
// bytes at lo (lo nil: none) or'ed with the field h.
func gridIndex(lo *Mem, h *hiBits, n int) reg.VecVirtual {
	idx := vec(n)
	if lo != nil {
		VPMOVZXBD(*lo, idx)
	}
	if h == nil {
		return idx
	}
	t := vec(n)
	broadcastTo(h.m, h.width, t)
	if h.pre > 0 {
		VPSLLD(U8(h.pre), t, t)
	}
	sh := make([]uint32, 8)
	copy(sh, h.shifts)
	VPSRLVD(dwordsConst(h.name+"Shifts", sh...), t, t)
	mask := iqConst(h.name+"Mask", bytesOf(32, func(i int) byte { return byte(h.mask >> (8 * (i % 4))) }))
	VPAND(mask, t, t)
	if lo == nil {
		return t
	}
	VPOR(t, idx, idx)
	return idx
}

// byteIndices are the n bytes at m as grid indices: index k emits a
// zero-extending load of byte k into a general register.
func byteIndices(m Mem) func(k int) reg.GPVirtual {
	return func(k int) reg.GPVirtual {
		i := GP64()
		MOVBQZX(m.Offset(k), i)
		return i
	}
}

// wordIndices9 are the low 9 bits of the words at m as grid indices
// (iq2_xs: index k from word k).
func wordIndices9(m Mem) func(k int) reg.GPVirtual {
	return func(k int) reg.GPVirtual {
		i := GP64()
		MOVWQZX(m.Offset(2*k), i)
		ANDL(U32(511), i.As32())
		return i
	}
}

// vecIndices are the dword lanes of idx (4 or 8) as grid indices: each
// qword moved to a general register once, its two dwords split there.
func vecIndices(idx reg.VecVirtual, n int) func(k int) reg.GPVirtual {
	halves := []reg.Register{idx.AsX()}
	if n == 8 {
		hi := XMM()
		VEXTRACTI128(U8(1), idx, hi)
		halves = append(halves, hi)
	}
	var pair reg.GPVirtual
	return func(k int) reg.GPVirtual {
		i := GP64()
		if k%2 == 1 {
			MOVQ(pair, i)
			SHRQ(U8(32), i)
			return i
		}
		pair = GP64()
		if h := halves[k/4]; k%4 == 0 {
			VMOVQ(h, pair)
		} else {
			VPEXTRQ(U8(1), h, pair)
		}
		MOVL(pair.As32(), i.As32())
		return i
	}
}

// loadGrid loads the n grid entries table[index(k)] (4 qwords for scale
// 8, 8 dwords for scale 4) into a ymm, entry k at byte scale·k: scalar
// loads into two xmm halves (on this EPYC faster than VPGATHERDQ /
// VPGATHERDD: iq3_xxs 28 against 38 ns per 256 values).
func loadGrid(table reg.Register, scale uint8, index func(k int) reg.GPVirtual) reg.VecVirtual {
	per := 16 / int(scale)
	h := [2]reg.VecVirtual{XMM(), XMM()}
	for k := range 2 * per {
		m := Mem{Base: table, Index: index(k), Scale: scale}
		x := h[k/per]
		switch {
		case k%per == 0 && scale == 8:
			VMOVQ(m, x)
		case k%per == 0:
			VMOVD(m, x)
		case scale == 8:
			VPINSRQ(U8(k%per), m, x, x)
		default:
			VPINSRD(U8(k%per), m, x, x)
		}
	}
	y := YMM()
	VINSERTI128(U8(1), h[1], h[0].AsY(), y)
	return y
}

// bitSigns returns 32 bytes ±1: byte i is −1 where bit bits[i] of byte
// shuf[i] (within its 128-bit lane) of the width bytes at m is set, else
// +1.
func bitSigns(name string, m Mem, width int, shuf, bits func(i int) byte) reg.VecVirtual {
	v := YMM()
	broadcastTo(m, width, v)
	VPSHUFB(iqConst(name+"Shuf", bytesOf(32, shuf)), v, v)
	b := iqConst(name+"Bits", bytesOf(32, bits))
	VPAND(b, v, v)
	VPCMPEQB(b, v, v)
	VPOR(iqConst("iqOnes", bytesOf(32, func(int) byte { return 1 })), v, v)
	return v
}

// signBits: the sign bytes of iq2_s and iq3_s, one per 8 values, bit j
// negating value j.
func signBits(m Mem) reg.VecVirtual {
	return bitSigns("iqSign", m, 4, func(i int) byte { return byte(i / 8) }, func(i int) byte { return 1 << (i % 8) })
}

// ksignsLookup returns the four ksigns patterns of the iq2_xxs / iq3_xxs
// word at m (7-bit indices at bits 7l … 7l+6) as ±1 bytes looked up in a
// table of 128 qwords at table+disp (iq2SignBytes, after the grid): the
// indices split in general registers, four scalar loads into two xmm
// halves: three vector operations (building the ±1 bytes from the bits in
// vectors took nine, and was the slower).
func ksignsLookup(m Mem, table reg.Register, disp int) reg.VecVirtual {
	w := GP32()
	MOVL(m, w)
	return ksignsLoad(table, disp, func(l int) reg.GPVirtual {
		i := GP64()
		MOVL(w, i.As32())
		if l > 0 {
			SHRL(U8(7*l), i.As32())
		}
		ANDL(U32(127), i.As32())
		return i
	})
}

// ksignsWords is ksignsLookup for iq2_xs: the ksigns index of each of
// the four words at m is its top 7 bits.
func ksignsWords(m Mem, table reg.Register, disp int) reg.VecVirtual {
	return ksignsLoad(table, disp, func(l int) reg.GPVirtual {
		i := GP64()
		MOVWQZX(m.Offset(2*l), i)
		SHRL(U8(9), i.As32())
		return i
	})
}

// ksignsLoad loads the ksigns patterns index(0) … index(3) of the table at
// table+disp into a ymm, pattern l at byte 8l.
func ksignsLoad(table reg.Register, disp int, index func(l int) reg.GPVirtual) reg.VecVirtual {
	h := [2]reg.VecVirtual{XMM(), XMM()}
	for l := range 4 {
		e := Mem{Base: table, Index: index(l), Scale: 8, Disp: disp}
		if l%2 == 0 {
			VMOVQ(e, h[l/2])
		} else {
			VPINSRQ(U8(1), e, h[l/2], h[l/2])
		}
	}
	y := YMM()
	VINSERTI128(U8(1), h[1], h[0].AsY(), y)
	return y
}

// trits returns iq1's 32 weights 8·grid + δ (δ the ±1 bytes) as
// magnitudes and signs.
func trits(g, delta reg.VecVirtual) (reg.VecVirtual, reg.VecVirtual) {
	VPADDB(delta, g, g)
	u := YMM()
	VPABSB(g, u)
	return u, g
}

var iqFormats = []iqGrid{
	// IQ2_XXS: 66-byte blocks: d f16 @0, per 32 values 8 bytes @2+8ib:
	// four grid indices (bytes), then a word of four 7-bit ksigns indices
	// and the scale in its top 4 bits; y = d·(2s+1)/8·grid·sign.
	{
		name: "IQ2XXS", desc: "iq2_xxs", size: 66, mul: 0.125,
		scales32: func(p reg.Register) reg.VecVirtual {
			// the words of 32s 0-3 and 4-7 (odd dwords of the 8-byte
			// groups at 2 and 34), in order
			a, s := YMM(), YMM()
			VMOVDQU(Mem{Base: p, Disp: 2}, a)
			VMOVDQU(Mem{Base: p, Disp: 34}, s)
			VSHUFPS(U8(0xdd), s, a, s) // 0 1 4 5 | 2 3 6 7
			VPERMQ(U8(0xd8), s, s)
			VPSRLD(U8(28), s, s)
			return s
		},
		weights: func(grid reg.Register) func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
			return func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
				u := loadGrid(grid, 8, byteIndices(Mem{Base: p, Disp: 2 + 8*ib}))
				sg := ksignsLookup(Mem{Base: p, Disp: 6 + 8*ib}, grid, 256*8)
				return u, sg
			}
		},
	},
	// IQ3_XXS: 98-byte blocks: d f16 @0, grid indices (bytes, four
	// magnitudes each) @2, eight per 32 values, then per 32 a word @66+4ib
	// of ksigns indices and the scale, as IQ2_XXS; y = d·(2s+1)/4·grid·sign.
	{
		name: "IQ3XXS", desc: "iq3_xxs", size: 98, mul: 0.25,
		scales32: func(p reg.Register) reg.VecVirtual {
			s := YMM()
			VMOVDQU(Mem{Base: p, Disp: 66}, s)
			VPSRLD(U8(28), s, s)
			return s
		},
		weights: func(grid reg.Register) func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
			return func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
				u := loadGrid(grid, 4, byteIndices(Mem{Base: p, Disp: 2 + 8*ib}))
				sg := ksignsLookup(Mem{Base: p, Disp: 66 + 4*ib}, grid, 256*4)
				return u, sg
			}
		},
	},
	// IQ2_S: 82-byte blocks: d f16 @0, low index bytes @2 (one per 8
	// values), sign bytes @34, qh @66 (bits 2l, 2l+1 of byte ib: index
	// l's bits 8, 9), scales @74 (nibbles, per 16); y = d·(2s+1)/8·grid·sign.
	{
		name: "IQ2S", desc: "iq2_s", size: 82, mul: 0.125,
		scales16: func(p reg.Register) reg.VecVirtual { return nibbles16(Mem{Base: p, Disp: 74}) },
		weights: func(grid reg.Register) func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
			return func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
				lo := Mem{Base: p, Disp: 2 + 4*ib}
				h := &hiBits{name: "iq2sHi", m: Mem{Base: p, Disp: 66 + ib}, width: 1, shifts: []uint32{0, 2, 4, 6}, mask: 0x300}
				u := loadGrid(grid, 8, vecIndices(gridIndex(&lo, h, 4), 4))
				return u, signBits(Mem{Base: p, Disp: 34 + 4*ib})
			}
		},
	},
	// IQ3_S: 110-byte blocks: d f16 @0, low index bytes @2 (one per 4
	// values), qh @66 (bit k of byte ib: index k's bit 8), sign bytes
	// @74, scales @106 (nibbles, per 32); y = d·(2s+1)·grid·sign.
	{
		name: "IQ3S", desc: "iq3_s", size: 110, mul: 1,
		scales32: func(p reg.Register) reg.VecVirtual {
			s := YMM()
			VPBROADCASTD(Mem{Base: p, Disp: 106}, s)
			VPSRLVD(dwordsConst("iq3sScaleShifts", 0, 4, 8, 12, 16, 20, 24, 28), s, s)
			VPAND(dwordsConst("iqFifteen", 15, 15, 15, 15, 15, 15, 15, 15), s, s)
			return s
		},
		weights: func(grid reg.Register) func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
			return func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
				lo := Mem{Base: p, Disp: 2 + 8*ib}
				h := &hiBits{name: "iq3sHi", m: Mem{Base: p, Disp: 66 + ib}, width: 1, shifts: []uint32{0, 1, 2, 3, 4, 5, 6, 7}, mask: 0x100}
				u := loadGrid(grid, 4, vecIndices(gridIndex(&lo, h, 8), 8))
				return u, signBits(Mem{Base: p, Disp: 74 + 4*ib})
			}
		},
	},
	// IQ2_XS: 74-byte blocks: d f16 @0, per 8 values a word @2+2l (a
	// 9-bit grid index, then a 7-bit ksigns index), scales @66 (nibbles,
	// per 16, as IQ2_S); y = d·(2s+1)/8·grid·sign. Its one- and four-row
	// kernels are rows4.go's (one table of every word's signed levels);
	// these are its two- and eight-row ones, on the grid.
	{
		name: "IQ2XSGrid", desc: "iq2_xs", size: 74, mul: 0.125, rows: []int{2, 8},
		scales16: func(p reg.Register) reg.VecVirtual { return nibbles16(Mem{Base: p, Disp: 66}) },
		weights: func(grid reg.Register) func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
			return func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
				m := Mem{Base: p, Disp: 2 + 8*ib}
				u := loadGrid(grid, 8, wordIndices9(m))
				return u, ksignsWords(m, grid, 512*8)
			}
		},
	},
	// IQ1_S: 50-byte blocks: d f16 @0, low index bytes @2 (one per 8
	// values), per 32 a u16 qh @34+2ib: bits 3l … 3l+2 index l's bits 8-10,
	// bits 12-14 the scale, bit 15 the shift's sign; y = d·(2s+1)·(grid ±
	// 1/8) = d·(2s+1)/8·(8·grid ± 1), the table holding 8·grid.
	{
		name: "IQ1S", desc: "iq1_s", size: 50, mul: 0.125,
		scales32: func(p reg.Register) reg.VecVirtual {
			s := YMM()
			VPMOVZXWD(Mem{Base: p, Disp: 34}, s)
			VPSRLD(U8(12), s, s)
			VPAND(dwordsConst("iqSeven", 7, 7, 7, 7, 7, 7, 7, 7), s, s)
			return s
		},
		weights: func(grid reg.Register) func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
			return func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
				lo, qh := Mem{Base: p, Disp: 2 + 4*ib}, Mem{Base: p, Disp: 34 + 2*ib}
				h := &hiBits{name: "iq1sHi", m: qh, width: 2, pre: 8, shifts: []uint32{0, 3, 6, 9}, mask: 0x700}
				g := loadGrid(grid, 8, vecIndices(gridIndex(&lo, h, 4), 4))
				delta := bitSigns("iq1sDelta", qh, 2, func(int) byte { return 1 }, func(int) byte { return 0x80 })
				return trits(g, delta)
			}
		},
	},
	// IQ1_M: 56-byte blocks: low index bytes @0 (one per 8 values), qh
	// @32 (a nibble per 8 values: index bits 8-10, then the shift's
	// sign), four u16 @48: 3-bit scales per 16 (bits 3k … of u16 k/4) and
	// d's f16 in their top nibbles; y = d·(2s+1)/8·(8·grid ± 1).
	{
		name: "IQ1M", desc: "iq1_m", size: 56, mul: 0.125,
		d:        iq1mD,
		scales16: iq1mScales,
		weights: func(grid reg.Register) func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
			return func(p reg.Register, ib int) (reg.VecVirtual, reg.VecVirtual) {
				lo, qh := Mem{Base: p, Disp: 4 * ib}, Mem{Base: p, Disp: 32 + 2*ib}
				h := &hiBits{name: "iq1mHi", m: qh, width: 2, pre: 8, shifts: []uint32{0, 4, 8, 12}, mask: 0x700}
				g := loadGrid(grid, 8, vecIndices(gridIndex(&lo, h, 4), 4))
				delta := bitSigns("iq1mDelta", qh, 2, func(i int) byte { return byte(i / 16) },
					func(i int) byte { return 0x08 << (4 * (i / 8 % 2)) })
				return trits(g, delta)
			}
		},
	},
}

// nibbles16 returns the 8 bytes at m as 16 nibbles (byte b's low nibble
// at 2b, its high at 2b+1).
func nibbles16(m Mem) reg.VecVirtual {
	m4 := iqConst("iqNibbles", bytesOf(16, func(int) byte { return 15 }))
	b, lo, hi := XMM(), XMM(), XMM()
	VMOVQ(m, b)
	VPAND(m4, b, lo)
	VPSRLW(U8(4), b, hi)
	VPAND(m4, hi, hi)
	VPUNPCKLBW(hi, lo, lo)
	return lo
}

// iq1mD is IQ1_M's d: the top nibbles of its four scale words, in order.
func iq1mD(p reg.Register) reg.VecVirtual {
	w, m, t, f := GP64(), GP64(), GP64(), GP64()
	MOVQ(Mem{Base: p, Disp: 48}, w)
	MOVQ(U64(0xf000f000f000f000), m)
	ANDQ(m, w)
	MOVQ(w, f)
	SHRQ(U8(12), f)
	for _, s := range []uint8{24, 36, 48} {
		MOVQ(w, t)
		SHRQ(U8(s), t)
		ORQ(t, f)
	}
	MOVWLZX(f.As16(), f.As32())
	x := XMM()
	VMOVD(f.As32(), x)
	VCVTPH2PS(x, x)
	return x
}

// iq1mScales returns IQ1_M's 16 scale codes as bytes: code j is bits
// 3(j%4) … of u16 j/4 at 48, each word spread by VPSHUFB, shifted to the
// top by VPMULLW and down by VPSRLW.
func iq1mScales(p reg.Register) reg.VecVirtual {
	w := YMM()
	VPBROADCASTQ(Mem{Base: p, Disp: 48}, w)
	VPSHUFB(iqConst("iq1mScaleShuf", bytesOf(32, func(i int) byte { return byte(2*(i/8) + i%2) })), w, w)
	VPMULLW(iqConst("iq1mScaleMul", bytesOf(32, func(i int) byte {
		m := uint16(1) << (13 - 3*(i/2%4))
		return byte(m >> (8 * (i % 2)))
	})), w, w)
	VPSRLW(U8(13), w, w)
	hi := XMM()
	VEXTRACTI128(U8(1), w, hi)
	lo := XMM()
	VPACKUSWB(hi, w.AsX(), lo)
	return lo
}

// dotIQ emits f's integer dot for rows activation rows (1, 2 or 4): per
// block the scales are built once, per 32 values the magnitudes and signs
// once for the rows.
func dotIQ(f iqGrid, rows int) {
	scaleDoc := "in integers per 32 values."
	if f.scales16 != nil {
		scaleDoc = "in integers per 16 values."
	}
	var p, q, d, qs, ds, q3, d3, n reg.Register
	if rows == 1 {
		name := fmt.Sprintf("dot%sQ8AVX2", f.name)
		TEXT(name, NOSPLIT, "func(blk *byte, q *int8, d *float32, nblk int, grid *byte) float32")
		Doc(name + " is Σ decode(blk)[i]·(d[i/32]·q[i]) over nblk " + f.desc + " blocks, " + scaleDoc)
		p, q, d, n = Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64()), Load(Param("nblk"), GP64())
	} else {
		name := fmt.Sprintf("dot%sQ8x%dAVX2", f.name, rows)
		TEXT(name, NOSPLIT, fmt.Sprintf("func(blk *byte, q *int8, d *float32, qstride, dstride, nblk int, out *[%d]float32, grid *byte)", rows))
		Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk " + f.desc + " blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride bytes.")
		p, q, d = Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64())
		qs, ds, n = Load(Param("qstride"), GP64()), Load(Param("dstride"), GP64()), Load(Param("nblk"), GP64())
		if rows == 4 {
			q3, d3 = GP64(), GP64()
			LEAQ(Mem{Base: qs, Index: qs, Scale: 2}, q3)
			LEAQ(Mem{Base: ds, Index: ds, Scale: 2}, d3)
		}
	}
	grid := Load(Param("grid"), GP64())
	row := func(r, qdisp int) (Mem, Mem) {
		if rows == 1 {
			return Mem{Base: q, Disp: qdisp}, Mem{Base: d}
		}
		return act8Row4(q, d, qs, ds, q3, d3, r, qdisp, 0)
	}
	var masks Mem
	if f.scales16 != nil {
		masks = iq2ScaleMasks()
	}
	weights := f.weights(grid)
	ones := onesW()
	fs := AllocLocal(32 * rows) // per row r: d_w·mul(·(2s_j+1))·d_r[j], j < 8
	acc := emit.Zeroed(max(2, rows))
	accOf := func(r, ib int) reg.VecVirtual {
		if rows == 1 {
			return acc[ib&1]
		}
		return acc[r]
	}
	emit.Loop(fmt.Sprintf("%s_%d", strings.ToLower(f.name), rows), n, func() {
		prefetchLines(p, f.size)
		dwy := iqBlockD(f, p)
		var sv reg.VecVirtual
		if f.scales32 != nil {
			dwy = iqScales32(f, p, dwy)
		} else {
			_, sv = iqScales16(f, p)
		}
		for r := range rows {
			_, dm := row(r, 0)
			blockScales(dwy, dm, fs.Offset(32*r))
		}
		for ib := range 8 {
			u, sg := weights(p, ib)
			scl := ones
			if sv != nil {
				scl = YMM()
				VPSHUFB(masks.Offset(32*ib), sv, scl)
			}
			for r := range rows {
				qm, _ := row(r, 32*ib)
				a := YMM()
				VMOVDQU(qm, a)
				VPSIGNB(sg, a, a)
				VPMADDUBSW(a, u, a)
				VPMADDWD(scl, a, a)
				scaleFMA(a, fs.Offset(32*r+4*ib), accOf(r, ib))
			}
		}
		ADDQ(U32(uint32(f.size)), p)
		ADDQ(U32(256), q)
		ADDQ(U32(32), d)
	})
	if rows == 1 {
		emit.Hsum(acc...)
	} else {
		storeOut(acc)
	}
}

// dotIQx8 emits f's eight-row kernel: per block the float factors
// d_w·mul(·(2s_j+1))·d_r[j] built once for the eight rows r and 32s j,
// per 32 values the weights once for the eight rows: their signs put on
// the magnitudes and 64 added, so that they are VPMADDUBSW's unsigned
// side (64 ± 62 at most, iq3_xxs) and the activation levels, straight
// from memory, its signed side (pairs ≤ 2·126·127, within int16). The 64
// adds 64·(2s+1)·Σq per row and 32 (or 16, the formats with a scale per
// 16), which the activation's sums take back once per block and row:
// acc_r −= 64·d_w·mul·(2s_j+1)·S_r[j] (S_r[j] = d_r[j]·Σq over the 32,
// Act8.S; per 16, Act8.H), as q4_K's mins do. Per row and 32 values:
// VPMADDUBSW, VPMADDWD, the conversion and one multiply-add.
func dotIQx8(f iqGrid) {
	name := fmt.Sprintf("dot%sQ8x8AVX2", f.name)
	TEXT(name, NOSPLIT, "func(blk *byte, q *int8, d, sums *float32, qstride, dstride, nblk int, out *[8]float32, grid *byte)")
	sumsDoc, sumsStride := "sums_r = sums + r·dstride (d_r[j]·Σq_r over 32 j, Act8.S)", 1
	if f.scales16 != nil {
		sumsDoc, sumsStride = "sums_r = sums + 2r·dstride (d_r[j]·Σq_r over 16 j, Act8.H)", 2
	}
	Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk " + f.desc + " blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride and " + sumsDoc + " bytes.")
	p, q, d, sums := Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64()), Load(Param("sums"), GP64())
	qs, ds, n := Load(Param("qstride"), GP64()), Load(Param("dstride"), GP64()), Load(Param("nblk"), GP64())
	rowQ, q4 := iqRows8(q, qs)
	grid := Load(Param("grid"), GP64())
	weights := f.weights(grid)
	var ones reg.VecVirtual
	var masks Mem
	if f.scales16 != nil {
		masks = iq2ScaleMasks()
	} else {
		ones = onesW()
	}
	sixtyFour := dwordsConst("iqSixtyFour", 0x42800000, 0x42800000, 0x42800000, 0x42800000,
		0x42800000, 0x42800000, 0x42800000, 0x42800000)
	fs := AllocLocal(32 * 8) // per row r: d_w·mul(·(2s_j+1))·d_r[j], j < 8
	acc := emit.Zeroed(8)
	emit.Loop(strings.ToLower(f.name)+"_8", n, func() {
		prefetchLines(p, f.size)
		l := iqBlockD(f, p)
		var sv reg.VecVirtual
		var off []reg.VecVirtual // 64·d_w·mul·(2s+1) per 32 (one vector) or per 16 (two)
		if f.scales32 != nil {
			l = iqScales32(f, p, l)
			o := YMM()
			VMULPS(sixtyFour, l, o)
			off = append(off, o)
		} else {
			var sc reg.VecVirtual
			sc, sv = iqScales16(f, p)
			d64 := YMM()
			VMULPS(sixtyFour, l, d64)
			hi := XMM()
			VPSRLDQ(U8(8), sc, hi)
			for _, b := range []reg.VecVirtual{sc, hi} {
				o := YMM()
				VPMOVZXBD(b, o)
				VCVTDQ2PS(o, o)
				VMULPS(d64, o, o)
				off = append(off, o)
			}
		}
		dr, sr := GP64(), GP64()
		MOVQ(d, dr)
		MOVQ(sums, sr)
		for r := range 8 {
			fr := YMM()
			VMULPS(Mem{Base: dr}, l, fr)
			VMOVUPS(fr, fs.Offset(32*r))
			for k, o := range off {
				VFNMADD231PS(Mem{Base: sr, Disp: 32 * k}, o, acc[r])
			}
			if r < 7 {
				ADDQ(ds, dr)
				for range sumsStride {
					ADDQ(ds, sr)
				}
			}
		}
		for ib := range 8 {
			u, sg := weights(p, ib)
			VPSIGNB(sg, u, u)
			VPADDB(iqConst("iqSixtyFourB", bytesOf(32, func(int) byte { return 64 })), u, u)
			scl := ones
			if sv != nil {
				scl = YMM()
				VPSHUFB(masks.Offset(32*ib), sv, scl)
			}
			for r := range 8 {
				x := YMM()
				VPMADDUBSW(rowQ(r, 32*ib), u, x)
				VPMADDWD(scl, x, x)
				scaleFMA(x, fs.Offset(32*r+4*ib), acc[r])
			}
		}
		ADDQ(U32(uint32(f.size)), p)
		ADDQ(U32(256), q)
		ADDQ(U32(256), q4)
		ADDQ(U32(32), d)
		ADDQ(U32(uint32(32*sumsStride)), sums)
	})
	storeOut(acc)
}

// dotIQK emits f's kernel of rows rows (2, 4 or 8) for activations with one scale per
// 256 values (quant.Act8.Quantize256, as ggml's q8_K; f a format with a
// scale per 32): the weights as dotIQx8 makes them (signs on, 64 added),
// and per row and 32 values VPMADDUBSW, then VPMADDWD by the 32's integer
// scale 2s+1 (in both words of every dword) and an integer add: the
// eight 32s of a block summed in int32 (|Σ| ≤ 8·31·2·32004), converted
// and multiplied by d_w·mul·D_r once per block and row (D_r the row's
// scale of the block's 256, d_r[0] of the block), where dotIQx8 converts
// and multiplies per 32. The +64 comes back as in dotIQx8, from the
// sums per 32 (Act8.S). The float accumulators live in the frame (eight
// int32 sums, the weights, the scale and a product fill the registers).
func dotIQK(f iqGrid, rows int) {
	name := fmt.Sprintf("dot%sQ8Kx%dAVX2", f.name, rows)
	TEXT(name, NOSPLIT, fmt.Sprintf("func(blk *byte, q *int8, d, sums *float32, qstride, dstride, nblk int, out *[%d]float32, grid *byte)", rows))
	Doc(name + ": out[r] = Σ decode(blk)[i]·(d_r[i/32]·q_r[i]) over nblk " + f.desc + " blocks for the rows q_r = q + r·qstride, d_r = d + r·dstride and sums_r = sums + r·dstride (d_r[j]·Σq_r over 32 j, Act8.S) bytes, each row with one scale per 256 values (d_r[8k] … d_r[8k+7] equal; d_r[8k] is read).")
	p, q, d, sums := Load(Param("blk"), GP64()), Load(Param("q"), GP64()), Load(Param("d"), GP64()), Load(Param("sums"), GP64())
	qs, ds, n := Load(Param("qstride"), GP64()), Load(Param("dstride"), GP64()), Load(Param("nblk"), GP64())
	rowQ, q4 := iqRows(q, qs, rows)
	grid := Load(Param("grid"), GP64())
	weights := f.weights(grid)
	sixtyFour := dwordsConst("iqSixtyFour", 0x42800000, 0x42800000, 0x42800000, 0x42800000,
		0x42800000, 0x42800000, 0x42800000, 0x42800000)
	odd := AllocLocal(32)         // 2s_j+1 per 32, as int32
	scl := AllocLocal(32)         // 2s_j+1 in both words of dword j
	accm := AllocLocal(32 * rows) // per row r: its float accumulator
	z := YMM()
	VXORPS(z, z, z)
	for r := range rows {
		VMOVUPS(z, accm.Offset(32*r))
	}
	emit.Loop(fmt.Sprintf("%s_%dk", strings.ToLower(f.name), rows), n, func() {
		prefetchLines(p, f.size)
		s := f.scales32(p)
		VPADDD(s, s, s)
		VPSUBD(iqMinusOne(), s, s) // 2s+1
		VMOVDQU(s, odd)
		t := YMM()
		VPSLLD(U8(16), s, t)
		VPOR(t, s, t)
		VMOVDQU(t, scl)
		iacc := make([]reg.VecVirtual, rows)
		for ib := range 8 {
			u, sg := weights(p, ib)
			VPSIGNB(sg, u, u)
			VPADDB(iqConst("iqSixtyFourB", bytesOf(32, func(int) byte { return 64 })), u, u)
			sc := YMM()
			VPBROADCASTD(scl.Offset(4*ib), sc)
			for r := range rows {
				x := YMM()
				VPMADDUBSW(rowQ(r, 32*ib), u, x)
				VPMADDWD(sc, x, x)
				if ib == 0 {
					iacc[r] = x
				} else {
					VPADDD(x, iacc[r], iacc[r])
				}
			}
		}
		dwy := iqBlockD(f, p)
		off := YMM() // 64·d_w·mul·(2s_j+1) per 32
		VCVTDQ2PS(odd, off)
		VMULPS(dwy, off, off)
		VMULPS(sixtyFour, off, off)
		dk, sk := GP64(), GP64() // row r's scales and sums
		MOVQ(d, dk)
		MOVQ(sums, sk)
		for r := range rows {
			a := YMM()
			VMOVUPS(accm.Offset(32*r), a)
			VFNMADD231PS(Mem{Base: sk}, off, a)
			fr := YMM()
			VBROADCASTSS(Mem{Base: dk}, fr)
			VMULPS(dwy, fr, fr)
			VCVTDQ2PS(iacc[r], iacc[r])
			VFMADD231PS(fr, iacc[r], a)
			VMOVUPS(a, accm.Offset(32*r))
			if r < rows-1 {
				ADDQ(ds, dk)
				ADDQ(ds, sk)
			}
		}
		ADDQ(U32(uint32(f.size)), p)
		ADDQ(U32(256), q)
		if q4 != nil {
			ADDQ(U32(256), q4)
		}
		ADDQ(U32(32), d)
		ADDQ(U32(32), sums)
	})
	storeFrameOut(accm, rows)
}

// iqRows is iqRows8 for rows rows (2, 4 or 8); q4 nil below eight.
func iqRows(q, qs reg.Register, rows int) (func(r, disp int) Mem, reg.Register) {
	if rows == 8 {
		return iqRows8(q, qs)
	}
	q3 := GP64()
	if rows == 4 {
		LEAQ(Mem{Base: qs, Index: qs, Scale: 2}, q3)
	}
	return func(r, disp int) Mem {
		m, _ := act8Row4(q, q, qs, qs, q3, q3, r, disp, 0)
		return m
	}, nil
}

// iqRows8 addresses the eight-row kernels' activation rows: rowQ(r, disp)
// is row r's levels at disp (q + r·qs), rows 4-7 from q4 (which the
// kernel steps beside q).
func iqRows8(q, qs reg.Register) (rowQ func(r, disp int) Mem, q4 reg.Register) {
	q3 := GP64()
	LEAQ(Mem{Base: qs, Index: qs, Scale: 2}, q3)
	// rows 4-7 four strides on
	r4 := GP64()
	LEAQ(Mem{Base: q, Index: qs, Scale: 4}, r4)
	return func(r, disp int) Mem {
		base := q
		if r >= 4 {
			base, r = r4, r-4
		}
		m, _ := act8Row4(base, base, qs, qs, q3, q3, r, disp, 0)
		return m
	}, r4
}

// iqBlockD returns the block at p's d_w·mul in every lane.
func iqBlockD(f iqGrid, p reg.Register) reg.VecVirtual {
	var dw reg.VecVirtual
	if f.d != nil {
		dw = f.d(p)
	} else {
		dw = emit.F16Scalar(Mem{Base: p})
	}
	if f.mul != 1 {
		k := dwordsConst(fmt.Sprintf("iqMul%08x", math.Float32bits(f.mul)), math.Float32bits(f.mul))
		VMULSS(k, dw, dw)
	}
	dwy := YMM()
	VBROADCASTSS(dw, dwy)
	return dwy
}

// iqScales32 returns the block at p's factors dwy·(2s_j+1) of its 8 32s
// (a format with scales32).
func iqScales32(f iqGrid, p reg.Register, dwy reg.VecVirtual) reg.VecVirtual {
	l := f.scales32(p)
	VPADDD(l, l, l)
	VPSUBD(iqMinusOne(), l, l) // 2s+1
	VCVTDQ2PS(l, l)
	VMULPS(dwy, l, l)
	return l
}

// iqScales16 returns the block at p's 16 codes 2s+1 (a format with
// scales16) as bytes of an xmm, and in both halves of a ymm.
func iqScales16(f iqGrid, p reg.Register) (reg.VecVirtual, reg.VecVirtual) {
	sc := f.scales16(p)
	VPADDB(sc, sc, sc)
	VPSUBB(iqMinusOne().AsX(), sc, sc) // 2s+1
	sv := YMM()
	VINSERTI128(U8(1), sc, sc.AsY(), sv)
	return sc, sv
}

// iqMinusOne is a vector of −1 in every byte (every dword).
func iqMinusOne() reg.VecVirtual {
	m := YMM()
	VPCMPEQD(m, m, m)
	return m
}

// iqKernels emits the one-, two-, four- and eight-row kernels of every
// iqGrid format.
func iqKernels() {
	for _, f := range iqFormats {
		rows := f.rows
		if rows == nil {
			rows = []int{1, 2, 4, 8}
		}
		for _, rows := range rows {
			if rows == 8 {
				dotIQx8(f)
			} else {
				dotIQ(f, rows)
			}
		}
		if f.scales32 != nil {
			for _, rows := range []int{2, 4, 8} {
				dotIQK(f, rows)
			}
		}
	}
}
