package quant

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkAct8 sets each integer kernel beside the format's float32
// Dot32 on a 2048-value row held in L1 (compute, not memory), in bytes of
// weights per second, and times the activation quantization; where the
// format has a four-row kernel, it against four one-row dots, a two-row
// kernel on its own, and an eight-row kernel against two four-row calls
// (and its version for Quantize256's rows, act8x8w, where there is one).
func BenchmarkAct8(b *testing.B) {
	const n = 2048
	r := rand.New(rand.NewPCG(1, 2))
	x := gaussian(n, 3)
	var a Act8
	a.Quantize(x)
	for _, name := range act8Formats {
		f := mustFormat(b, name)
		blk := randomBlocks(f, n/f.BlockElems, r)
		if f.Encode != nil {
			f.Encode(gaussian(n, 4), blk)
		}
		k, ok := RowLayout{Format: f, Len: n, Stored: n}.Act8Kernel()
		if !ok {
			b.Skip("no integer kernels here")
		}
		b.Run(name+"/dot32", func(b *testing.B) {
			b.SetBytes(int64(len(blk)))
			for b.Loop() {
				f.Dot32(blk, x)
			}
		})
		b.Run(name+"/act8", func(b *testing.B) {
			b.SetBytes(int64(len(blk)))
			for b.Loop() {
				k.Dot(blk, &a)
			}
		})
		if !k.HasDot4() {
			continue
		}
		// four activation rows (prefill): bytes of weights per second, the
		// row read once by the four-row kernel, four times by one-row dots
		var ar Act8Rows
		ar.Quantize(gaussian(4*n, 5), 4, n)
		four := [4]*Act8{ar.Row(0), ar.Row(1), ar.Row(2), ar.Row(3)}
		var out [4]float32
		b.Run(name+"/act8x4", func(b *testing.B) {
			b.SetBytes(int64(len(blk)))
			for b.Loop() {
				k.Dot4(blk, &four, &out)
			}
		})
		b.Run(name+"/act8x1x4", func(b *testing.B) {
			b.SetBytes(int64(len(blk)))
			for b.Loop() {
				for r, a := range four {
					out[r] = k.Dot(blk, a)
				}
			}
		})
		if k.HasDot2() {
			two := [2]*Act8{ar.Row(0), ar.Row(1)}
			out2 := make([][2]float32, 1)
			b.Run(name+"/act8x2", func(b *testing.B) {
				b.SetBytes(int64(len(blk)))
				for b.Loop() {
					k.DotRows2(blk, 0, &two, out2)
				}
			})
		}
		if !k.HasDot8() {
			continue
		}
		// eight rows: the eight-row kernel against two four-row calls
		// (ns/op for eight rows: halve it to set it beside act8x4)
		var ar8 Act8Rows
		ar8.Quantize(gaussian(8*n, 6), 8, n)
		var eight [8]*Act8
		for r := range eight {
			eight[r] = ar8.Row(r)
		}
		var out8 [8]float32
		b.Run(name+"/act8x8", func(b *testing.B) {
			b.SetBytes(int64(len(blk)))
			for b.Loop() {
				k.Dot8(blk, &eight, &out8)
			}
		})
		if k.Scale256() {
			// the same rows with one scale per 256 (Quantize256): the
			// eight-row kernel for such rows
			var w8 Act8Rows
			w8.Quantize256(gaussian(8*n, 6), 8, n)
			var wide [8]*Act8
			for r := range wide {
				wide[r] = w8.Row(r)
			}
			b.Run(name+"/act8x8w", func(b *testing.B) {
				b.SetBytes(int64(len(blk)))
				for b.Loop() {
					k.Dot8(blk, &wide, &out8)
				}
			})
		}
		b.Run(name+"/act8x4x2", func(b *testing.B) {
			b.SetBytes(int64(len(blk)))
			for b.Loop() {
				k.Dot4(blk, (*[4]*Act8)(eight[:4]), &out)
				k.Dot4(blk, (*[4]*Act8)(eight[4:]), &out)
			}
		})
	}
	b.Run("quantize", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			a.Quantize(x)
		}
	})
}
