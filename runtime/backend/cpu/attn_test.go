package cpu

import (
	"math"
	"math/rand"
	"testing"
)

// The vector attention dots and sums equal the plain float64 loops to
// rounding (they only add in another order), at the head widths models use
// and with keys spread over a cache row (stride > hd).
func TestAttnVectorKernels(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, hd := range []int{8, 64, 128, 256} {
		for _, n := range []int{1, 3, 17} {
			stride := 3*hd + 8
			q := make([]float64, hd)
			for i := range q {
				q[i] = rng.NormFloat64()
			}
			k := make([]float32, n*stride)
			for i := range k {
				k[i] = float32(rng.NormFloat64())
			}
			got, want := make([]float64, n), make([]float64, n)
			attnDots(q, k, got, stride)
			attnDotsGo(q, k, want, stride)
			for j := range got {
				if math.Abs(got[j]-want[j]) > 1e-12*(1+math.Abs(want[j])) {
					t.Fatalf("hd %d, key %d of %d: dot %v, want %v", hd, j, n, got[j], want[j])
				}
			}
			acc, ref := make([]float64, hd), make([]float64, hd)
			for j := range n {
				w := rng.Float64()
				attnAxpy(acc, k[j*stride:][:hd], w)
				attnAxpyGo(ref, k[j*stride:][:hd], w)
			}
			for i := range acc {
				if math.Abs(acc[i]-ref[i]) > 1e-12*(1+math.Abs(ref[i])) {
					t.Fatalf("hd %d, %d keys: sum[%d] %v, want %v", hd, n, i, acc[i], ref[i])
				}
			}
		}
	}
}
