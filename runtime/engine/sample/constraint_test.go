package sample

import (
	"math/rand"
	"slices"
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

// Greedy checks the best few first: the first allowed is the masked
// argmax, and no mask is built; when all are refused, the masked argmax.
// Either way the token is accepted into the constraint.
func TestConstraintGreedy(t *testing.T) {
	s, _ := New(Params{})
	c := allow(0, 3)
	s.SetConstraint(c)
	if tok := s.Sample(base, nil); tok != 0 || c.masks != 0 {
		t.Errorf("argmax allowed: token %d with %d masks, want 0 with none", tok, c.masks)
	}
	c.allowed = map[int]bool{2: true, 3: true}
	if tok := s.Sample(base, nil); tok != 2 || c.masks != 0 {
		t.Errorf("argmax refused: token %d with %d masks, want 2 with none", tok, c.masks)
	}
	// Twelve ids, the best eight refused: the mask decides (id 9 over 11).
	wide := logw(12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 3)
	c.allowed = map[int]bool{9: true, 11: true}
	if tok := s.Sample(wide, nil); tok != 9 || c.masks != 1 {
		t.Errorf("the best eight refused: token %d with %d masks, want 9 with one", tok, c.masks)
	}
	c.allowed = map[int]bool{2: true, 3: true}
	tok, ok := s.Verify(base, nil, 3)
	if tok != 2 || ok {
		t.Errorf("verify of a worse allowed draft: %d %v, want 2 false", tok, ok)
	}
	if tok, ok := s.Verify(base, nil, 2); tok != 2 || !ok {
		t.Errorf("verify of the masked argmax: %d %v, want 2 true", tok, ok)
	}
	if want := []int{0, 2, 9, 2, 2}; !slices.Equal(c.accepted, want) {
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

// best is the head of the order argmax breaks ties in: logit descending,
// id ascending; with and without penalties.
func TestBestFew(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for trial := range 200 {
		row := make([]float32, 1+rng.Intn(40))
		for i := range row {
			row[i] = float32(rng.Intn(6)) // many ties
		}
		p := Params{}
		if trial%2 == 1 {
			p = Params{RepeatPenalty: 1.5, PenaltyLastN: -1}
		}
		s, _ := New(p)
		hist := []int{0, 1, 2}
		w := s.penalize(row, hist)
		want := make([]int, len(row))
		for i := range want {
			want[i] = i
		}
		slices.SortStableFunc(want, func(a, b int) int { return better(w, a, b) })
		n := 1 + rng.Intn(10)
		got := s.best(row, hist, n)
		if !slices.Equal(got, want[:min(n, len(row))]) {
			t.Fatalf("row %v, penalties %v: best %d = %v, want %v", row, p.penalized(), n, got, want[:min(n, len(row))])
		}
	}
}
