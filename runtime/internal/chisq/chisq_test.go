package chisq

import (
	"math"
	"testing"
)

// Critical against published 0.999 quantiles of chi-square (NIST/SEMATECH
// e-Handbook, table 1.3.6.7.4), and Survival against closed forms: for df 2,
// P(X > x) = exp(−x/2); for df 1, erfc(√(x/2)).
func TestCritical(t *testing.T) {
	for df, want := range map[int]float64{1: 10.828, 2: 13.816, 5: 20.515, 10: 29.588, 30: 59.703, 100: 149.449} {
		if got := Critical(df); math.Abs(got-want) > 0.002 {
			t.Errorf("df %d: %.4f, want %.3f", df, got, want)
		}
	}
	for _, x := range []float64{0.1, 1, 3, 10, 40} {
		if got, want := Survival(x, 2), math.Exp(-x/2); math.Abs(got-want) > 1e-12*math.Max(1, want) {
			t.Errorf("Survival(%v, 2) = %v, want %v", x, got, want)
		}
		if got, want := Survival(x, 1), math.Erfc(math.Sqrt(x/2)); math.Abs(got-want) > 1e-12 {
			t.Errorf("Survival(%v, 1) = %v, want %v", x, got, want)
		}
	}
}

func TestCheck(t *testing.T) {
	p := []float64{0.5, 0.25, 0.25, 0}
	if _, err := Check([]int{500, 250, 250, 0}, p); err != nil {
		t.Errorf("exact counts: %v", err)
	}
	if _, err := Check([]int{600, 200, 200, 0}, p); err == nil {
		t.Error("counts 600/200/200 for .5/.25/.25 of 1000 passed (chi-square 40)")
	}
	if _, err := Check([]int{500, 250, 249, 1}, p); err == nil {
		t.Error("a draw of a probability-0 outcome passed")
	}
}
