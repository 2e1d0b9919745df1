package eval

import (
	"math"
	"slices"
	"testing"
)

func TestChunks(t *testing.T) {
	for _, c := range []struct {
		n, ctx, count int
		spread        bool
		want          []int
	}{
		{10, 3, 0, false, []int{0, 3, 6}},
		{10, 3, 2, false, []int{0, 3}},
		{10, 3, 9, false, []int{0, 3, 6}},
		// torch.linspace(0, 10-3-1, 4).long() = [0, 2, 4, 6]
		{10, 3, 4, true, []int{0, 2, 4, 6}},
		// torch.linspace(0, 100-7-1, 3).long() = [0, 46, 92]
		{100, 7, 3, true, []int{0, 46, 92}},
	} {
		got, err := Chunks(c.n, c.ctx, c.count, c.spread)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Chunks(%d, %d, %d, %v) = %v, %v; want %v", c.n, c.ctx, c.count, c.spread, got, err, c.want)
		}
	}
	for _, c := range [][4]int{{2, 3, 0, 0}, {10, 1, 0, 0}, {10, 3, -1, 0}, {10, 3, 1, 1}} {
		if _, err := Chunks(c[0], c[1], c[2], c[3] == 1); err == nil {
			t.Errorf("Chunks%v: no error", c)
		}
	}
}

// Uniform logits over V tokens: every NLL is log V, so the perplexity is V
// with no spread; a 2-token case checks the KL by hand.
func TestScores(t *testing.T) {
	const V = 8
	var s Scores
	for i := range 5 {
		s.Add(LogSoftmax(make([]float32, V)), i%V)
	}
	ppl, se := s.Perplexity()
	if math.Abs(ppl-V) > 1e-5 || se > 1e-9 {
		t.Errorf("uniform: perplexity %v ± %v, want %d ± 0", ppl, se, V)
	}
	// NLLs ln 2 and ln 4 (p = 1/2, 1/4): mean 1.5 ln 2, ppl 2^1.5; the
	// sample variance of the two is (ln 2)²/2, the error of the mean
	// sqrt of that / 2 = ln2/2.
	var s2 Scores
	s2.Add([]float32{float32(math.Log(0.5)), float32(math.Log(0.5))}, 0)
	s2.Add([]float32{float32(math.Log(0.25)), float32(math.Log(0.75))}, 0)
	ppl, se = s2.Perplexity()
	if math.Abs(ppl-math.Pow(2, 1.5)) > 1e-5 || math.Abs(se-ppl*math.Ln2/2) > 1e-5 {
		t.Errorf("perplexity %v ± %v, want %v ± %v", ppl, se, math.Pow(2, 1.5), math.Pow(2, 1.5)*math.Ln2/2)
	}
	if s2.Top1() != 0.5 {
		t.Errorf("top-1 %v, want 0.5 (ties go to the first)", s2.Top1())
	}
	// KL((1/2,1/2) ‖ (1/4,3/4)) = ½ln2 + ½ln(2/3).
	var k Scores
	half := []float32{float32(math.Log(0.5)), float32(math.Log(0.5))}
	k.AddBase([]float32{float32(math.Log(0.25)), float32(math.Log(0.75))}, half)
	k.AddBase(half, half)
	mean, p99, mx, same, ok := k.KL()
	want := 0.5*math.Ln2 + 0.5*math.Log(2.0/3)
	if !ok || math.Abs(mx-want) > 1e-6 || math.Abs(mean-want/2) > 1e-6 || p99 != mx || same != 0.5 {
		t.Errorf("KL mean %v p99 %v max %v same %v, want max %v mean %v same 0.5", mean, p99, mx, same, want, want/2)
	}
}
