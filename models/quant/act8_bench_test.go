package quant

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkAct8 sets each integer kernel beside the format's float32
// Dot32 on a 2048-value row held in L1 (compute, not memory), in bytes of
// weights per second, and times the activation quantization.
func BenchmarkAct8(b *testing.B) {
	const n = 2048
	r := rand.New(rand.NewPCG(1, 2))
	x := gaussian(n, 3)
	var a Act8
	a.Quantize(x)
	for _, name := range act8Formats {
		f := mustFormat(b, name)
		blk := randomBlocks(f, n/f.BlockElems, r)
		f.Encode(gaussian(n, 4), blk)
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
	}
	b.Run("quantize", func(b *testing.B) {
		b.SetBytes(4 * n)
		for b.Loop() {
			a.Quantize(x)
		}
	})
}
