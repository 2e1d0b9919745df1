package sample

import (
	"math"
	"testing"

	"github.com/strata-llm/strata/runtime/internal/chisq"
)

// The draws follow the chain's distribution: Sample, and Verify for every
// possible draft (accepted or not, the returned token is distributed as p).
// The expected distributions are the hand-derived ones of TestChainDistributions.
func TestDrawsFollowTheChain(t *testing.T) {
	n := 40000
	if testing.Short() {
		n = 10000
	}
	cases := []struct {
		name string
		p    Params
		want []float64
	}{
		{"plain", Params{Temperature: 1, Seed: 1}, frac(8, 4, 2, 1, 1)},
		{"top-k 3, temperature ½", Params{Temperature: 0.5, TopK: 3, Seed: 2}, frac(64, 16, 4, 0, 0)},
		{"top-p 0.8", Params{Temperature: 1, TopP: 0.8, Seed: 3}, frac(8, 4, 2, 0, 0)},
		{"min-p 0.2, temperature 2", Params{Temperature: 2, MinP: 0.2, Seed: 4}, frac(2*math.Sqrt2, 2, math.Sqrt2, 0, 0)},
	}
	for _, c := range cases {
		s, err := New(c.p)
		if err != nil {
			t.Fatal(err)
		}
		counts := make([]int, len(c.want))
		for range n {
			counts[s.Sample(base, nil)]++
		}
		r, err := chisq.Check(counts, c.want)
		if err != nil {
			t.Errorf("%s: Sample: %v", c.name, err)
		}
		t.Logf("%s: Sample, %d draws: %v", c.name, n, r)
		for draft := range c.want {
			counts := make([]int, len(c.want))
			accepted := 0
			for range n / 4 {
				tok, ok := s.Verify(base, nil, draft)
				counts[tok]++
				if ok {
					accepted++
				}
			}
			if _, err := chisq.Check(counts, c.want); err != nil {
				t.Errorf("%s: Verify with draft %d: %v", c.name, draft, err)
			}
			// A deterministic draft is accepted with probability p[draft].
			if c.want[draft] == 0 && accepted > 0 {
				t.Errorf("%s: draft %d (p 0) accepted %d times", c.name, draft, accepted)
			}
		}
	}
}

func TestGreedyVerify(t *testing.T) {
	s, _ := New(Params{})
	for draft := range 5 {
		tok, ok := s.Verify(base, nil, draft)
		if tok != 0 || ok != (draft == 0) {
			t.Errorf("greedy verify of draft %d: %d %v, want 0 %v", draft, tok, ok, draft == 0)
		}
	}
}

// Draws under the penalties follow the hand-penalised logits of
// TestPenalties (0, -2.75, 0.5, 1 from 2, -1, 0.5, 1 after tokens 0 1 0).
func TestDrawsUnderPenalties(t *testing.T) {
	n := 40000
	if testing.Short() {
		n = 10000
	}
	s, _ := New(Params{Temperature: 1, RepeatPenalty: 2, PresencePenalty: 0.5, FrequencyPenalty: 0.25, PenaltyLastN: 3, Seed: 5})
	want := frac(1, math.Exp(-2.75), math.Exp(0.5), math.E)
	counts := make([]int, 4)
	for range n {
		counts[s.Sample([]float32{2, -1, 0.5, 1}, []int{0, 1, 0})]++
	}
	r, err := chisq.Check(counts, want)
	if err != nil {
		t.Error(err)
	}
	t.Logf("%d draws: %v", n, r)
}
