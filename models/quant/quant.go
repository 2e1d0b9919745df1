// Package quant is the registry of storage formats: how many bytes a run of
// elements takes and how to turn it into float32 and back. The generator uses
// it to size buffers; the runtime and the weight loaders use it to decode.
package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Format is one storage format. Formats are block formats: BlockElems elements
// occupy BlockBytes bytes; the plain float formats have blocks of one element.
type Format struct {
	Name string
	// Code is the ggml type id (f32 0, f16 1, bf16 30): a stable number for
	// kernels that take the format as a specialization value.
	Code       int
	BlockElems int
	BlockBytes int
	// Decode turns len(dst) elements (a multiple of BlockElems) starting at src into float32.
	Decode func(src []byte, dst []float32)
	// Encode writes len(src) elements into dst, rounding to nearest even.
	Encode func(src []float32, dst []byte)
}

// Bytes is the storage size of n elements; n must be a multiple of BlockElems.
func (f *Format) Bytes(n int) int { return n / f.BlockElems * f.BlockBytes }

var registry = map[string]*Format{
	"f32":  {Name: "f32", BlockElems: 1, BlockBytes: 4, Decode: decodeF32, Encode: encodeF32},
	"f16":  {Name: "f16", Code: 1, BlockElems: 1, BlockBytes: 2, Decode: decodeF16, Encode: encodeF16},
	"bf16": {Name: "bf16", Code: 30, BlockElems: 1, BlockBytes: 2, Decode: decodeBF16, Encode: encodeBF16},
}

// Lookup returns the format called name, or an error listing the known ones.
func Lookup(name string) (*Format, error) {
	if f, ok := registry[name]; ok {
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
	return nil, fmt.Errorf("unknown quant format code %d", code)
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

func decodeF16(src []byte, dst []float32) {
	for i := range dst {
		dst[i] = F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
	}
}

func encodeF16(src []float32, dst []byte) {
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F16(v))
	}
}
