package sample

import (
	"testing"

	"github.com/strata-llm/strata/runtime/internal/chisq"
)

// setConstraint allows a fixed set of ids and records what the sampler did
// with it.
type setConstraint struct {
	allowed  map[int]bool
	masks    int   // Mask calls
	accepted []int // Accept calls
}

func allow(ids ...int) *setConstraint {
	c := &setConstraint{allowed: map[int]bool{}}
	for _, id := range ids {
		c.allowed[id] = true
	}
	return c
}

func (c *setConstraint) Allows(t int) bool { return c.allowed[t] }
func (c *setConstraint) Mask() []uint64 {
	c.masks++
	m := make([]uint64, 1)
	for t := range c.allowed {
		m[0] |= 1 << t
	}
	return m
}
func (c *setConstraint) Accept(t int) error { c.accepted = append(c.accepted, t); return nil }
func (c *setConstraint) Finished() bool     { return false }
func (c *setConstraint) Admit(d []int) int  { return len(d) }

// The mask applies before the filters (weights 8 4 2 1 1, ids 1–3 allowed):
// top-k 2 then keeps ids 1 and 2 (4 : 2); a mask after top-k would leave
// id 1 alone. Top-p 0.6 over the masked 4 : 2 : 1 needs ids 1 and 2 (after
// the filter it would keep ids 0 and 1, then 1 alone). Min-p 0.3 after the mask keeps p ≥ 0.3·4/7: ids 1 and 2.
func TestConstraintBeforeFilters(t *testing.T) {
	cases := []struct {
		name string
		p    Params
		want []float64
	}{
		{"temperature 1", Params{Temperature: 1}, frac(0, 4, 2, 1, 0)},
		{"top-k 2", Params{Temperature: 1, TopK: 2}, frac(0, 4, 2, 0, 0)},
		{"top-p 0.6", Params{Temperature: 1, TopP: 0.6}, frac(0, 4, 2, 0, 0)},
		{"min-p 0.3", Params{Temperature: 1, MinP: 0.3}, frac(0, 4, 2, 0, 0)},
		{"greedy", Params{}, frac(0, 1, 0, 0, 0)},
	}
	for _, c := range cases {
		s, _ := New(c.p)
		s.SetConstraint(allow(1, 2, 3))
		if got := s.Probs(base, nil); !near(got, c.want, 1e-8) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// Greedy checks the argmax first: allowed, no mask is built; refused, the
// masked argmax. Either way the token is accepted into the constraint.
func TestConstraintGreedy(t *testing.T) {
	s, _ := New(Params{})
	c := allow(0, 3)
	s.SetConstraint(c)
	if tok := s.Sample(base, nil); tok != 0 || c.masks != 0 {
		t.Errorf("argmax allowed: token %d with %d masks, want 0 with none", tok, c.masks)
	}
	c.allowed = map[int]bool{2: true, 3: true}
	if tok := s.Sample(base, nil); tok != 2 || c.masks != 1 {
		t.Errorf("argmax refused: token %d with %d masks, want 2 with one", tok, c.masks)
	}
	tok, ok := s.Verify(base, nil, 3)
	if tok != 2 || ok {
		t.Errorf("verify of a worse allowed draft: %d %v, want 2 false", tok, ok)
	}
	if tok, ok := s.Verify(base, nil, 2); tok != 2 || !ok {
		t.Errorf("verify of the masked argmax: %d %v, want 2 true", tok, ok)
	}
	if want := []int{0, 2, 2, 2}; len(c.accepted) != 4 || c.accepted[1] != 2 || c.accepted[3] != 2 {
		t.Errorf("accepted %v, want %v", c.accepted, want)
	}
}

// The check-first draw (draw from p, keep it if allowed, else draw from the
// masked p) and Verify under a constraint are distributed as p restricted
// to the allowed ids and renormalised; filters take the mask first.
func TestConstrainedDraws(t *testing.T) {
	n := 40000
	if testing.Short() {
		n = 10000
	}
	cases := []struct {
		name string
		p    Params
		want []float64
	}{
		{"plain", Params{Temperature: 1, Seed: 1}, frac(0, 4, 2, 1, 0)},
		{"temperature ½", Params{Temperature: 0.5, Seed: 2}, frac(0, 16, 4, 1, 0)},
		{"top-k 2", Params{Temperature: 1, TopK: 2, Seed: 3}, frac(0, 4, 2, 0, 0)},
	}
	for _, c := range cases {
		s, _ := New(c.p)
		s.SetConstraint(allow(1, 2, 3))
		counts := make([]int, 5)
		for range n {
			counts[s.Sample(base, nil)]++
		}
		r, err := chisq.Check(counts, c.want)
		if err != nil {
			t.Errorf("%s: Sample: %v", c.name, err)
		}
		t.Logf("%s: %d draws: %v", c.name, n, r)
		for draft := range 5 {
			counts := make([]int, 5)
			for range n / 4 {
				tok, ok := s.Verify(base, nil, draft)
				counts[tok]++
				if ok != (tok == draft) {
					t.Fatalf("%s: verify of %d returned %d, accepted %v", c.name, draft, tok, ok)
				}
			}
			if _, err := chisq.Check(counts, c.want); err != nil {
				t.Errorf("%s: Verify with draft %d: %v", c.name, draft, err)
			}
		}
	}
}
