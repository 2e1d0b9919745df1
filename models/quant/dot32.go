package quant

import "unsafe"

//go:generate go run -C asm . -out ../dot_amd64.s -stubs ../dot_amd64_decl.go -pkg quant

// Dot32 is the fast dot product the runtime multiplies with: Σ Decode(block)[i]·x[i]
// accumulated in float32. Where the machine has a vectorized kernel for the
// format (archDots: amd64 with AVX2, FMA and F16C) it runs that; elsewhere the
// reference Dot, rounded once. The vectorized kernels differ from Dot by
// float32 reassociation only: per 8-lane accumulator the products are summed
// in a different order and in float32, so |Dot32 − Dot| stays within a few
// float32 ulps of Σ|w·x| (the tests bound it by 1e-5·Σ|w·x| + 1e-30 per
// row, well inside any quantization error).
//
// Adding a format's kernel is one entry in archDots; formats without one
// keep working through their reference Dot.
type dot32Func = func(block []byte, x []float32) float32

type dot4Func = func(block []byte, x []float32, stride, n int, out *[4]float32)

func init() {
	vec, vec4 := archDots(), archDots4()
	for name, f := range registry {
		f.Dot32 = referenceDot32(f.Dot)
		if v, ok := vec[name]; ok {
			f.Dot32, f.Vectorized = v, true
		}
		f.Dot32x4 = vec4[name]
	}
}

func referenceDot32(dot func([]byte, []float32) float64) dot32Func {
	return func(b []byte, x []float32) float32 { return float32(dot(b, x)) }
}

// Dot32x4 is Dot32 for the four rows x[r·stride : r·stride+Len]: through
// the format's Dot32x4 where it has one and the row is unpadded, else four
// Dot32s.
func (r RowLayout) Dot32x4(row []byte, x []float32, stride int, out *[4]float32) {
	if r.Format.Dot32x4 != nil && r.Stored == r.Len {
		r.Format.Dot32x4(row, x, stride, r.Len, out)
		return
	}
	for k := range out {
		out[k] = r.Dot32(row, x[k*stride:])
	}
}

// Dot32 is Dot through the format's Dot32: Σ DecodeRow(row)[i]·x[i] over
// the row's Len values, the padding meeting implicit zeros.
func (r RowLayout) Dot32(row []byte, x []float32) float32 {
	x = x[:r.Len]
	whole := r.Len / r.Format.BlockElems * r.Format.BlockElems
	s := r.Format.Dot32(row, x[:whole])
	if whole == r.Len {
		return s
	}
	buf := tailPool.Get().(*[256]float32)
	tail := buf[:r.Format.BlockElems]
	clear(tail[copy(tail, x[whole:]):])
	s += r.Format.Dot32(row[r.Format.Bytes(whole):], tail)
	tailPool.Put(buf)
	return s
}

var f32Format = registry["f32"]

// DotF32 is Σ a[i]·b[i] over len(a) values (b at least as long), in float32:
// the f32 format's Dot32, vectorized where the machine allows.
func DotF32(a, b []float32) float32 {
	if len(a) == 0 {
		return 0
	}
	b = b[:len(a)]
	return f32Format.Dot32(unsafe.Slice((*byte)(unsafe.Pointer(&a[0])), 4*len(a)), b)
}
