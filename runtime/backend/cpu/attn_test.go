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

// The AVX2 silu·up agrees with the Go kernel (math.Exp) to the float32 bit
// but for rounding ties, over the range the MLPs see and past both ends of
// exp's (±708, where e^−x over- or underflows), zeros and signed zeros.
func TestSiluMulVector(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const n = 1 << 16
	g, u := make([]float32, n+3), make([]float32, n+3)
	for i := range g {
		switch {
		case i%7 == 0:
			g[i] = float32(rng.NormFloat64() * 300) // far out: e^−x past float32's range
		case i%11 == 0:
			g[i] = []float32{0, float32(math.Copysign(0, -1)), 800, -800, 709, -709, 88, -88, -103}[i/11%9]
		default:
			g[i] = float32(rng.NormFloat64() * 4)
		}
		u[i] = float32(rng.NormFloat64())
	}
	want, got := make([]float32, 2*(n+3)), make([]float32, 2*(n+3))
	siluMulGo(want[:n+3], g, u)
	siluMul(got[:n+3], g, u)
	copy(want[n+3:], g) // and silu alone, in place
	copy(got[n+3:], g)
	siluRowGo(want[n+3:])
	siluRow(got[n+3:])
	g, u = append(g, g...), append(u, make([]float32, n+3)...)
	diff := 0
	for i := range want {
		if got[i] == want[i] {
			continue
		}
		ulps := int64(math.Float32bits(got[i])) - int64(math.Float32bits(want[i]))
		if ulps < -1 || ulps > 1 || math.Signbit(float64(got[i])) != math.Signbit(float64(want[i])) {
			t.Fatalf("g=%v u=%v: got %v, want %v", g[i], u[i], got[i], want[i])
		}
		diff++
	}
	if diff > 2*n/1000 {
		t.Errorf("%d of %d results differ by one ulp; ties should be rare", diff, n)
	}
	t.Logf("%d of %d differ by one ulp", diff, len(want))
	// A broken kernel is caught: one coefficient short of the series.
	bad := append([]float32(nil), got...)
	bad[5] = math.Nextafter32(bad[5], 10)
	bad[5] = math.Nextafter32(bad[5], 10)
	if ulps := int64(math.Float32bits(bad[5])) - int64(math.Float32bits(want[5])); ulps >= -1 && ulps <= 1 {
		t.Errorf("a two-ulp error passes the check")
	}
}

// The AVX2 softmax exp agrees with math.Exp to within a few units of the
// double's last place (the series' truncation is 2e-16 at most), over the shifted scores attention sees (≤ 0) and
// past exp's range (where it clamps at e^−708 ≈ 3e-308, which no sum of
// probabilities notices).
func TestExpShiftVector(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	const n = 1<<14 + 3
	x := make([]float64, n)
	for i := range x {
		x[i] = -math.Abs(rng.NormFloat64() * 20)
		if i%97 == 0 {
			x[i] = -700 * rng.Float64()
		}
	}
	x[0] = 0
	want, got := append([]float64(nil), x...), append([]float64(nil), x...)
	expShiftGo(want, 1.5)
	expShift(got, 1.5)
	worst := 0.0
	for i := range want {
		if want[i] < 1e-300 {
			if got[i] > 1e-300 {
				t.Fatalf("x=%v: got %v, want %v", x[i]-1.5, got[i], want[i])
			}
			continue
		}
		worst = max(worst, math.Abs(got[i]-want[i])/want[i])
	}
	if worst > 1e-14 {
		t.Errorf("worst relative error %.3g, want ≤ 1e-14", worst)
	}
	t.Logf("worst relative error %.3g", worst)
}
