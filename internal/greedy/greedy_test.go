package greedy

import (
	"math"
	"math/rand"
	"testing"
)

// TestChoose holds Choose to the plain scan (first index of
// the strict maximum, NaNs skipped, 0 when nothing beats −Inf) on rows with
// ties, NaNs and infinities at every position of a block and across blocks.
func TestChoose(t *testing.T) {
	plain := func(x []float32) int {
		best, top := 0, float32(math.Inf(-1))
		for i, v := range x {
			if v > top {
				best, top = i, v
			}
		}
		return best
	}
	rng := rand.New(rand.NewSource(7))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for trial := range 2000 {
		n := rng.Intn(300)
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.Intn(5)) // ties everywhere
		}
		for range rng.Intn(4) {
			if n == 0 {
				break
			}
			switch i := rng.Intn(n); rng.Intn(4) {
			case 0:
				x[i] = nan
			case 1:
				x[i] = inf
			case 2:
				x[i] = -inf
			default:
				x[i] = 9
			}
		}
		if trial%50 == 0 {
			for i := range x {
				x[i] = [3]float32{nan, -inf, -inf}[rng.Intn(3)]
			}
		}
		finite := true
		for _, v := range x {
			finite = finite && !math.IsNaN(float64(v)) && !math.IsInf(float64(v), 0)
		}
		if got, gotFinite := Choose(x); got != plain(x) || gotFinite != finite {
			t.Fatalf("trial %d (n=%d): Choose %d (finite %v), the plain scan %d (finite %v): %v", trial, n, got, gotFinite, plain(x), finite, x)
		}
	}
}
