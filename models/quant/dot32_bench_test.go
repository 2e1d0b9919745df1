package quant

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDot32 compares each format's reference Dot with its Dot32 on a
// 2048-value row (a hidden-size row of the 80B models), in bytes of weights
// read per second.
func BenchmarkDot32(b *testing.B) {
	const n = 2048
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range Names() {
		f, _ := Lookup(name)
		blk := randomBlocks(f, n/f.BlockElems, r)
		x := gaussian(n, 3)
		b.Run(name+"/ref", func(b *testing.B) {
			b.SetBytes(int64(len(blk)))
			for b.Loop() {
				f.Dot(blk, x)
			}
		})
		b.Run(name+"/dot32", func(b *testing.B) {
			b.SetBytes(int64(len(blk)))
			for b.Loop() {
				f.Dot32(blk, x)
			}
		})
	}
}
