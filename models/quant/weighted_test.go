package quant

import (
	"bytes"
	"math"
	"math/rand"
	"testing"
)

// TestIQ2XSImportance (and the iq4 formats): with an importance matrix the quantizer trades error
// on the unimportant columns for less on the important ones, so the error
// weighted by the matrix (what a matmul with such activations sees) is
// lower than without; with a matrix of ones it is the unweighted quantizer
// bit for bit (ggml's quant_weights multiply its own weights).
func TestIQ2XSImportance(t *testing.T) {
	for _, name := range []string{"iq2_xs", "iq4_nl", "iq4_xs"} {
		t.Run(name, func(t *testing.T) { testImportance(t, name) })
	}
}

func testImportance(t *testing.T, name string) {
	f, _ := Lookup(name)
	const cols, rows = 512, 16
	rng := rand.New(rand.NewSource(7))
	x := make([]float32, cols*rows)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	qw := make([]float32, cols)
	ones := make([]float32, cols)
	for i := range qw {
		qw[i] = float32(math.Exp(2 * rng.NormFloat64())) // activations' mean x² spans orders of magnitude
		ones[i] = 1
	}
	plain, weighted, unit := make([]byte, f.Bytes(len(x))), make([]byte, f.Bytes(len(x))), make([]byte, f.Bytes(len(x)))
	if err := f.EncodeImportance(x, nil, plain); err != nil {
		t.Fatal(err)
	}
	if err := f.EncodeImportance(x, qw, weighted); err != nil {
		t.Fatal(err)
	}
	if err := f.EncodeImportance(x, ones, unit); err != nil {
		t.Fatal(err)
	}
	// iq2_xs without a matrix weighs by sqrt(σ² + x²), which ones leave
	// unchanged; the iq4 formats weigh by x² without one.
	if name == "iq2_xs" && !bytes.Equal(unit, plain) {
		t.Error("an importance matrix of ones changed the blocks")
	}
	werr := func(b []byte) float64 {
		y := make([]float32, len(x))
		f.Decode(b, y)
		var s float64
		for i := range x {
			d := float64(x[i] - y[i])
			s += float64(qw[i%cols]) * d * d
		}
		return s
	}
	ep, ew := werr(plain), werr(weighted)
	t.Logf("imatrix-weighted squared error: %.4g without, %.4g with (ratio %.3f)", ep, ew, ew/ep)
	if ew >= 0.9*ep {
		t.Errorf("weighted error %.4g with the matrix, %.4g without: expected at least 10%% less", ew, ep)
	}
	if err := f.EncodeImportance(x, qw[:100], weighted); err == nil {
		t.Error("rows of 100 weights (not whole blocks) accepted")
	}
	if err := f.EncodeImportance(x, qw[:90], weighted); err == nil {
		t.Error("rows of 90 weights (not whole blocks) accepted")
	}
	q8, _ := Lookup("q8_0")
	if err := q8.EncodeImportance(x, qw, weighted); err == nil {
		t.Error("q8_0, whose quantizer takes no weights, accepted an imatrix")
	}
}
