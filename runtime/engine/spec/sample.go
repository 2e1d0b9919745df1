package spec

import (
	"math"
	"math/rand"
)

// Softmax returns the probabilities of logits at temperature t (> 0).
func Softmax(logits []float32, t float64) []float64 {
	p := make([]float64, len(logits))
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, float64(v))
	}
	var z float64
	for i, v := range logits {
		p[i] = math.Exp((float64(v) - mx) / t)
		z += p[i]
	}
	for i := range p {
		p[i] /= z
	}
	return p
}

// Sample draws an index from probabilities p.
func Sample(p []float64, rng *rand.Rand) int {
	u := rng.Float64()
	var c float64
	for i, v := range p {
		c += v
		if u < c {
			return i
		}
	}
	// Rounding left u above the total: the last index with mass.
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] > 0 {
			return i
		}
	}
	return len(p) - 1
}

// Verify is one step of speculative sampling: the target distribution p, the
// drafter's distribution q (nil for a deterministic drafter, which proposed
// draft with certainty) and the draft. It accepts the draft with probability
// min(1, p/q); on rejection it draws from the residual max(p − q, 0),
// renormalised. Either way the returned token is distributed exactly as p.
func Verify(p, q []float64, draft int, rng *rand.Rand) (tok int, accepted bool) {
	qd := 1.0
	if q != nil {
		qd = q[draft]
	}
	if qd > 0 && rng.Float64()*qd < p[draft] {
		return draft, true
	}
	res := make([]float64, len(p))
	var z float64
	for i := range p {
		qi := 0.0
		switch {
		case q != nil:
			qi = q[i]
		case i == draft:
			qi = 1
		}
		res[i] = math.Max(p[i]-qi, 0)
		z += res[i]
	}
	if z == 0 { // p = q: the draft is always accepted; unreachable, but stay exact
		return Sample(p, rng), false
	}
	for i := range res {
		res[i] /= z
	}
	return Sample(res, rng), false
}
