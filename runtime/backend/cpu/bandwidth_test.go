package cpu

import (
	"testing"

	"github.com/strata-llm/strata/models/quant"
)

// BenchmarkMemory measures this machine's memory bandwidth, the ceiling of
// decode (which reads every touched weight once per token): copy (bytes
// read + written, memmove) and read (a vectorized float32 sum over a buffer
// far larger than the caches). docs/cpu.md puts the decode bandwidth next to it.
func BenchmarkMemory(b *testing.B) {
	const size = 256 << 20
	src := make([]float32, size/4)
	for i := range src {
		src[i] = float32(i & 7)
	}
	b.Run("copy", func(b *testing.B) {
		dst := make([]float32, len(src))
		copy(dst, src) // fault the pages in first
		b.SetBytes(2 * size)
		for b.Loop() {
			copy(dst, src)
		}
	})
	b.Run("read", func(b *testing.B) {
		ones := make([]float32, 1<<14)
		parts := make([]float32, len(src)/len(ones))
		b.SetBytes(size)
		for b.Loop() { // on every thread, as decode reads
			Backend.pool.parallel(len(parts), 1<<15, func(lo, hi int) {
				for p := lo; p < hi; p++ {
					parts[p] = quant.DotF32(src[p*len(ones):(p+1)*len(ones)], ones)
				}
			})
		}
	})
}
