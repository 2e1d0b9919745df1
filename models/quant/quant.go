// Package quant is the registry of storage formats: how many bytes a run of
// elements takes, how to turn it into float32 and back, and how to take a dot
// product with it in place. The generator uses it to size buffers; the
// runtime and the weight loaders use it to decode and multiply.
//
// The quantized formats (q8_0, q4_k, q6_k, iq2_xs, iq4_nl, iq4_xs) are ggml's
// blocks byte for byte (../shared/specs/ggml_formats.md §9), so GGUF files
// carry them unchanged; their lookup tables are read from the embedded
// ggml_tables.json. Rows that are not whole blocks: see ForRow.
package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
)

// Format is one storage format. Formats are block formats: BlockElems elements
// occupy BlockBytes bytes; the plain float formats have blocks of one element.
// Every block layout is byte-compatible with ggml's type of the same Code.
type Format struct {
	Name string
	// Code is the ggml type id (f32 0, f16 1, q8_0 8, q4_K 12, …): a stable
	// number for kernels that take the format as a specialization value, and
	// the type id a GGUF file records.
	Code       int
	BlockElems int
	BlockBytes int
	// Decode turns len(dst) elements (a multiple of BlockElems) starting at src into float32.
	Decode func(src []byte, dst []float32)
	// Encode writes len(src) elements (a multiple of BlockElems) into dst. The
	// float formats round to nearest even; the quantized formats search their
	// scales for the least (weighted) squared error, as ggml's reference
	// quantizers do. Nil for the decode-only formats (iq2_xxs, iq3_xxs,
	// iq2_s, iq3_s, iq1_s, iq1_m): strata has no quantizer for them; files
	// that hold them run as they are.
	Encode func(src []float32, dst []byte)
	// EncodeWeighted, where the format's quantizer takes an importance
	// matrix (ggml's quant_weights; nil otherwise), is Encode with per-column
	// weights: src is whole rows of len(qw) values (a multiple of
	// BlockElems), each value's error weighted by qw of its column. Use
	// EncodeImportance, which checks the lengths.
	EncodeWeighted func(src, qw []float32, dst []byte)
	// Dot returns Σ Decode(block)[i]·x[i] over len(x) elements (a multiple of
	// BlockElems) without materialising the decoded row. It accumulates in
	// float64: per block (or sub-block) Σ q·x with the small integer levels,
	// then times the scale, so the result differs from a float64 dot of the
	// decoded float32 values by the decoder's float32 rounding only.
	Dot func(block []byte, x []float32) float64
	// Dot32 is Dot accumulated in float32, vectorized where the machine
	// allows (see dot32.go); the runtime's hot path.
	Dot32 func(block []byte, x []float32) float32
	// Dot32x4, where the format has one (nil otherwise), is Dot32 for four
	// activation rows at once: out[r] = Σ Decode(block)[i]·x[r·stride+i]
	// over n values, each block decoded once for the four.
	Dot32x4 func(block []byte, x []float32, stride, n int, out *[4]float32)
	// Vectorized reports whether Dot32 runs an assembly kernel.
	Vectorized bool
}

// Bytes is the storage size of n elements; n must be a multiple of BlockElems.
func (f *Format) Bytes(n int) int { return n / f.BlockElems * f.BlockBytes }

var registry = map[string]*Format{
	"f32":     {Name: "f32", BlockElems: 1, BlockBytes: 4, Decode: decodeF32, Encode: encodeF32, Dot: dotF32},
	"f16":     {Name: "f16", Code: 1, BlockElems: 1, BlockBytes: 2, Decode: decodeF16, Encode: encodeF16, Dot: dotF16},
	"bf16":    {Name: "bf16", Code: 30, BlockElems: 1, BlockBytes: 2, Decode: decodeBF16, Encode: encodeBF16, Dot: dotBF16},
	"q8_0":    blockFormat("q8_0", 8, "block_q8_0", decodeQ8_0, encodeQ8_0, dotQ8_0),
	"q4_0":    blockFormat("q4_0", 2, "block_q4_0", layoutQ4_0.decode, layoutQ4_0.encode, layoutQ4_0.dot),
	"q4_1":    blockFormat("q4_1", 3, "block_q4_1", layoutQ4_1.decode, layoutQ4_1.encode, layoutQ4_1.dot),
	"q5_0":    blockFormat("q5_0", 6, "block_q5_0", layoutQ5_0.decode, layoutQ5_0.encode, layoutQ5_0.dot),
	"q5_1":    blockFormat("q5_1", 7, "block_q5_1", layoutQ5_1.decode, layoutQ5_1.encode, layoutQ5_1.dot),
	"q2_k":    blockFormat("q2_k", 10, "block_q2_K", decodeQ2K, encodeQ2K, dotQ2K),
	"q3_k":    blockFormat("q3_k", 11, "block_q3_K", decodeQ3K, encodeQ3K, dotQ3K),
	"q5_k":    blockFormat("q5_k", 13, "block_q5_K", decodeQ5K, encodeQ5K, dotQ5K),
	"q4_k":    blockFormat("q4_k", 12, "block_q4_K", decodeQ4K, encodeQ4K, dotQ4K),
	"q6_k":    blockFormat("q6_k", 14, "block_q6_K", decodeQ6K, encodeQ6K, dotQ6K),
	"iq2_xxs": blockFormat("iq2_xxs", 16, "block_iq2_xxs", decodeIQ2XXS, nil, dotIQ2XXS),
	"iq3_xxs": blockFormat("iq3_xxs", 18, "block_iq3_xxs", decodeIQ3XXS, nil, dotIQ3XXS),
	"iq2_s":   blockFormat("iq2_s", 22, "block_iq2_s", decodeIQ2S, nil, dotIQ2S),
	"iq3_s":   blockFormat("iq3_s", 21, "block_iq3_s", decodeIQ3S, nil, dotIQ3S),
	"iq1_s":   blockFormat("iq1_s", 19, "block_iq1_s", decodeIQ1S, nil, dotIQ1S),
	"iq1_m":   blockFormat("iq1_m", 29, "block_iq1_m", decodeIQ1M, nil, dotIQ1M),
	"iq2_xs":  blockFormat("iq2_xs", 17, "block_iq2_xs", decodeIQ2XS, encodeIQ2XS, dotIQ2XS),
	"iq4_nl":  blockFormat("iq4_nl", 20, "block_iq4_nl", decodeIQ4NL, encodeIQ4NL, dotIQ4NL),
	"iq4_xs":  blockFormat("iq4_xs", 23, "block_iq4_xs", decodeIQ4XS, encodeIQ4XS, dotIQ4XS),
}

// blockFormat builds a quantized format whose block geometry is read from
// the ggml tables (so it cannot drift from ggml's static_asserts) and checked
// against the ggml type id.
func blockFormat(name string, code int, cstruct string, dec func([]byte, []float32), enc func([]float32, []byte), dot func([]byte, []float32) float64) *Format {
	elems, bytes := blockOf(cstruct)
	t, err := GGMLTypeByCode(code)
	if err != nil || t.BlockElems != elems || t.BlockBytes != bytes {
		panic(fmt.Sprintf("quant: %s: ggml type %d does not match %s (%d elements, %d bytes)", name, code, cstruct, elems, bytes))
	}
	return &Format{Name: name, Code: code, BlockElems: elems, BlockBytes: bytes, Decode: dec, Encode: enc, Dot: dot}
}

// Lookup returns the format called name (case-insensitive, so ggml's "q4_K"
// works too), or an error listing the known ones.
func Lookup(name string) (*Format, error) {
	if f, ok := registry[strings.ToLower(name)]; ok {
		return f, nil
	}
	return nil, fmt.Errorf("unknown quant format %q (expected one of %s)", name, strings.Join(Names(), ", "))
}

// ByCode returns the format with ggml type id code.
func ByCode(code int) (*Format, error) {
	for _, f := range registry {
		if f.Code == code {
			return f, nil
		}
	}
	return nil, fmt.Errorf("unknown quant format code %d (no codec for ggml type %d)", code, code)
}

// Names lists the registered formats, sorted.
func Names() []string {
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Quantizable lists the formats that have a quantizer (Encode), sorted:
// those a quant plan may name.
func Quantizable() []string {
	var out []string
	for _, n := range Names() {
		if registry[n].Encode != nil {
			out = append(out, n)
		}
	}
	return out
}

func decodeF32(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
	}
}

func encodeF32(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
}

func decodeBF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:])) << 16)
	}
}

// BF16 rounds a float32 to bfloat16 bits, nearest even; NaN stays NaN.
func BF16(v float32) uint16 {
	b := math.Float32bits(v)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

func encodeBF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], BF16(v))
	}
}

// F16ToF32 widens IEEE half-precision bits exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	man := uint32(h) & 0x3ff
	switch {
	case exp == 0 && man == 0:
		return math.Float32frombits(sign)
	case exp == 0: // subnormal: normalise
		e := uint32(127 - 15 + 1)
		for man&0x400 == 0 {
			man <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (man&0x3ff)<<13)
	case exp == 0x1f:
		return math.Float32frombits(sign | 0xff<<23 | man<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | man<<13)
}

// F16 rounds a float32 to IEEE half-precision bits, nearest even, with
// overflow to infinity and gradual underflow.
func F16(v float32) uint16 {
	b := math.Float32bits(v)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	man := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN
		return sign | 0x7e00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		man |= 0x800000
		shift := uint32(14 - exp)
		half := uint32(1) << (shift - 1)
		rest := man & (1<<shift - 1)
		out := man >> shift
		if rest > half || (rest == half && out&1 == 1) {
			out++
		}
		return sign | uint16(out)
	}
	out := uint32(exp)<<10 | man>>13
	rest := man & 0x1fff
	if rest > 0x1000 || (rest == 0x1000 && out&1 == 1) {
		out++ // may carry into the exponent, which is the right rounding
	}
	return sign | uint16(out)
}

// f16Table maps every half-precision bit pattern to its float32 value: a
// 256 KiB table read beats F16ToF32's branches about fourfold in bulk decodes.
var f16Table = sync.OnceValue(func() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for i := range t {
		t[i] = F16ToF32(uint16(i))
	}
	return t
})

func decodeF16(src []byte, dst []float32) {
	t := f16Table()
	for i := range dst {
		dst[i] = t[binary.LittleEndian.Uint16(src[2*i:])]
	}
}

func encodeF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F16(v))
	}
}

func dotF32(src []byte, x []float32) float64 {
	var s float64
	for i, v := range x {
		s += float64(math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))) * float64(v)
	}
	return s
}

func dotF16(src []byte, x []float32) float64 {
	t := f16Table()
	var s float64
	for i, v := range x {
		s += float64(t[binary.LittleEndian.Uint16(src[2*i:])]) * float64(v)
	}
	return s
}

func dotBF16(src []byte, x []float32) float64 {
	var s float64
	for i, v := range x {
		s += float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(src[2*i:]))<<16)) * float64(v)
	}
	return s
}

// f16At reads the ggml_half at the start of b.
func f16At(b []byte) float32 { return F16ToF32(binary.LittleEndian.Uint16(b)) }

// putF16 stores v as a ggml_half and returns the value actually stored, so
// encoders can quantize against the scale the decoder will see.
func putF16(b []byte, v float32) float32 {
	h := F16(v)
	binary.LittleEndian.PutUint16(b, h)
	return F16ToF32(h)
}

// nearestInt rounds to the nearest integer, ties to even, saturating far
// outside the ranges the quantizers use (and mapping NaN to 0) so table
// indexes stay bounded whatever the input.
func nearestInt(x float32) int {
	switch {
	case x != x:
		return 0
	case x > 1<<22:
		return 1 << 22
	case x < -(1 << 22):
		return -(1 << 22)
	}
	return int(math.RoundToEven(float64(x)))
}

func clampInt(v, lo, hi int) int {
	return min(max(v, lo), hi)
}
