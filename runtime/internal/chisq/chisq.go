// Package chisq is Pearson's chi-square goodness-of-fit test, for the
// statistical tests of the sampling chain and of speculative decoding.
package chisq

import (
	"fmt"
	"math"
)

// Alpha is the tests' significance: a correct sampler fails a check with
// probability 1e-3 (each test's seeds are fixed, so a pass is reproducible).
const Alpha = 1e-3

// Result is a check's statistic, its degrees of freedom and the critical
// value it was held to.
type Result struct {
	Stat, Critical float64
	DF             int
}

func (r Result) String() string {
	return fmt.Sprintf("chi-square %.1f, %d degrees of freedom (critical %.1f)", r.Stat, r.DF, r.Critical)
}

// Check compares observed counts with expected probabilities. A count where
// the probability is 0 fails at once; cells expected fewer than 5 times are
// pooled into one; the statistic must stay under the 1−Alpha quantile of the
// chi-square distribution with (cells − 1) degrees of freedom.
func Check(counts []int, p []float64) (Result, error) {
	if len(counts) != len(p) {
		return Result{}, fmt.Errorf("%d counts for %d probabilities", len(counts), len(p))
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	var stat, poolE float64
	poolO, cells := 0, 0
	for i, c := range counts {
		e := p[i] * float64(n)
		switch {
		case p[i] == 0:
			if c > 0 {
				return Result{}, fmt.Errorf("outcome %d drawn %d times, but its probability is 0", i, c)
			}
		case e < 5:
			poolE += e
			poolO += c
		default:
			stat += (float64(c) - e) * (float64(c) - e) / e
			cells++
		}
	}
	if poolE > 0 {
		stat += (float64(poolO) - poolE) * (float64(poolO) - poolE) / poolE
		cells++
	}
	if cells < 2 {
		return Result{}, nil // one outcome: nothing random to test
	}
	r := Result{Stat: stat, DF: cells - 1, Critical: Critical(cells - 1)}
	if stat > r.Critical {
		return r, fmt.Errorf("%v exceeds the critical value (p < %g): counts %v, expected probabilities %v", r, Alpha, counts, p)
	}
	return r, nil
}

// Critical is the 1−1e-3 quantile of chi-square with df degrees of
// freedom, found by bisection on Survival.
func Critical(df int) float64 {
	lo, hi := 0.0, float64(df)+100*math.Sqrt(float64(df))+100
	for range 200 {
		mid := (lo + hi) / 2
		if Survival(mid, df) > Alpha {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// Survival is P(X > x) for X chi-square with df degrees of freedom: the
// regularized upper incomplete gamma Q(df/2, x/2), by its series below
// a+1 and its continued fraction (modified Lentz) above.
func Survival(x float64, df int) float64 {
	a, y := float64(df)/2, x/2
	if y <= 0 {
		return 1
	}
	lg, _ := math.Lgamma(a)
	pre := math.Exp(a*math.Log(y) - y - lg)
	if y < a+1 {
		sum, term := 1/a, 1/a
		for n := 1; n < 1000; n++ {
			term *= y / (a + float64(n))
			sum += term
			if term < sum*1e-16 {
				break
			}
		}
		return 1 - pre*sum
	}
	const tiny = 1e-300
	b := y + 1 - a
	c, d := 1/tiny, 1/b
	h := d
	for i := 1; i < 1000; i++ {
		an := -float64(i) * (float64(i) - a)
		b += 2
		d = an*d + b
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = b + an/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		delta := d * c
		h *= delta
		if math.Abs(delta-1) < 1e-16 {
			break
		}
	}
	return pre * h
}
