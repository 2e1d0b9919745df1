package gguf

import (
	"math"
	"testing"
)

func TestTransforms(t *testing.T) {
	if v := PlusOne.ToGGUF(0.25); v != 1.25 || PlusOne.FromGGUF(v) != 0.25 {
		t.Errorf("PlusOne: %v", v)
	}
	// A_log = ln 2 → ssm_a = −2.
	if v := NegExp.ToGGUF(float32(math.Ln2)); math.Abs(float64(v)+2) > 1e-6 || math.Abs(float64(NegExp.FromGGUF(v))-math.Ln2) > 1e-6 {
		t.Errorf("NegExp: %v", v)
	}
	if v := NegExp.FromGGUF(0.5); !math.IsNaN(float64(v)) {
		t.Errorf("NegExp of a positive ssm_a: %v, want NaN", v)
	}
	if Same.ToGGUF(3) != 3 || Same.FromGGUF(3) != 3 {
		t.Error("Same changes values")
	}
}
