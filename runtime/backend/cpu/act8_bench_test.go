package cpu

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkDecodeHead is one decoded token's head matmul at Qwen3-Next's
// shape (151936 rows of 2048, 255–331 MB: larger than the caches, so it
// reads from memory as decode does), float32 activations against integer
// dots; bytes of weights per second, to set beside BenchmarkMemory.
func BenchmarkDecodeHead(b *testing.B) {
	const m, k = 151936, 2048
	scales := map[string][]int{"q8_0": {0}, "q6_k": {208}}
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"q8_0", "q6_k"} {
		w := randomMatrix(name, m, k, scales[name], r)
		x := make([]float32, k)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		y := make([]float32, m)
		for _, on := range []bool{false, true} {
			label := map[bool]string{false: "/f32", true: "/int8"}[on]
			b.Run(name+label, func(b *testing.B) {
				defer SetIntegerDots(IntegerDots())
				SetIntegerDots(on)
				b.SetBytes(int64(len(w.data)))
				for b.Loop() {
					matmulRows(Backend.pool, w, x, y, 1)
				}
			})
		}
	}
}

// BenchmarkDecodeStream is decode's one activation row against a matrix
// far larger than the caches (192 MB, rows of 2048 values), per format, in
// bytes of weights per second on every thread: whether a format's one-row
// kernel keeps up with memory (BenchmarkMemory's read) or not.
func BenchmarkDecodeStream(b *testing.B) {
	const k = 2048
	scales := map[string][]int{"q8_0": {0}, "q6_k": {208}, "q2_k": {80, 82}, "q3_k": {108}, "q4_k": {0, 2}, "q5_k": {0, 2}}
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"q8_0", "q6_k", "q5_k", "q4_k", "q3_k", "q2_k"} {
		m := (192 << 20) / randomMatrix(name, 1, k, nil, r).rowBytes
		w := randomMatrix(name, m, k, scales[name], r)
		x := make([]float32, k)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		y := make([]float32, m)
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(w.data)))
			for b.Loop() {
				matmulRows(Backend.pool, w, x, y, 1)
			}
		})
	}
}
