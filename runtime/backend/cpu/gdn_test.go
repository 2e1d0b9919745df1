package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// gdnRef64 is both sweeps in float64 from the same S, the independent
// reference: S1 = e·S, u1 = S1ᵀk; S2 = S1 + k·deltaᵀ, u2 = S2ᵀq.
func gdnRef64(S, k, delta, q []float32, dk, dv int, e float32) (u1, u2, mag1, mag2 []float64) {
	u1, u2 = make([]float64, dv), make([]float64, dv)
	mag1, mag2 = make([]float64, dv), make([]float64, dv)
	for i := 0; i < dk; i++ {
		for c := 0; c < dv; c++ {
			s1 := float64(float32(float64(S[i*dv+c]) * float64(e)))
			u1[c] += s1 * float64(k[i])
			mag1[c] += math.Abs(s1 * float64(k[i]))
			s2 := s1 + float64(k[i])*float64(delta[c])
			u2[c] += s2 * float64(q[i])
			mag2[c] += math.Abs(s2 * float64(q[i]))
		}
	}
	return
}

func randF32(r *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64())
	}
	return v
}

// TestGDNSweeps holds the kernels (AVX2 where dv allows, else Go) and the Go
// reference to the float64 sweeps within float32 reassociation (dk terms
// per column: 1e-5 of Σ|terms|), at shapes off the kernels' 8- and
// 32-column blocks; the AVX2 and Go versions also agree with each other.
func TestGDNSweeps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, shape := range [][2]int{{1, 8}, {16, 16}, {3, 40}, {128, 128}, {7, 72}, {5, 3}, {128, 96}} {
		dk, dv := shape[0], shape[1]
		S0 := randF32(r, dk*dv)
		k, q, delta := randF32(r, dk), randF32(r, dk), randF32(r, dv)
		e := float32(0.9)
		want1, want2, mag1, mag2 := gdnRef64(S0, k, delta, q, dk, dv, e)
		for _, impl := range []struct {
			name   string
			decay  func(S, k, u []float32, dk, dv int, e float32)
			update func(S, k, delta, q, u []float32, dk, dv int)
		}{{"dispatch", gdnDecayDot, gdnUpdateDot}, {"go", gdnDecayDotGo, gdnUpdateDotGo}} {
			S := slices.Clone(S0)
			u := make([]float32, dv)
			impl.decay(S, k, u, dk, dv, e)
			for c := range u {
				if math.Abs(float64(u[c])-want1[c]) > 1e-5*mag1[c]+1e-30 {
					t.Errorf("%s dk %d dv %d: decay u[%d] = %.9g, want %.9g", impl.name, dk, dv, c, u[c], want1[c])
				}
			}
			impl.update(S, k, delta, q, u, dk, dv)
			for c := range u {
				if math.Abs(float64(u[c])-want2[c]) > 1e-5*mag2[c]+1e-30 {
					t.Errorf("%s dk %d dv %d: update u[%d] = %.9g, want %.9g", impl.name, dk, dv, c, u[c], want2[c])
				}
			}
			// The state both leave behind: e·S + k·deltaᵀ, FMA-rounded at most differently.
			for i := 0; i < dk; i++ {
				for c := 0; c < dv; c++ {
					w := float64(float32(float64(S0[i*dv+c])*float64(e))) + float64(k[i])*float64(delta[c])
					if got := float64(S[i*dv+c]); math.Abs(got-w) > 2e-7*(math.Abs(w)+math.Abs(float64(k[i]*delta[c]))) {
						t.Fatalf("%s dk %d dv %d: S[%d][%d] = %.9g, want %.9g", impl.name, dk, dv, i, c, got, w)
					}
				}
			}
		}
	}
}
