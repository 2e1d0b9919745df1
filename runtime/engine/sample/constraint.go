package sample

import (
	"math"
	"math/bits"

	"github.com/strata-llm/strata/runtime/engine/spec"
)

// Constraint restricts the tokens the chain may pick: a grammar
// (runtime/engine/grammar.Constraint). Its mask applies to the penalised
// logits before top-k, top-p, min-p and the temperature, as llama.cpp's
// grammar sampler does; the sampler advances it with every token it
// returns, so it follows the committed tokens only.
type Constraint interface {
	// Allows reports whether tok may come next.
	Allows(tok int) bool
	// Mask is the allowed ids as a bitset (bit id%64 of word id/64); ids
	// past it are refused. The caller only reads it.
	Mask() []uint64
	// Accept advances the state by tok.
	Accept(tok int) error
	// Finished reports that nothing may follow: generation ends.
	Finished() bool
	// Admit is how many leading tokens of drafts the grammar allows in a
	// row, the state left as it is.
	Admit(drafts []int) int
}

// SetConstraint makes the chain pick only tokens c allows (nil: none) and
// advance c with each token Sample and Verify return.
func (s *Sampler) SetConstraint(c Constraint) { s.con = c }

// constrained picks the next token under the constraint. It checks the
// token the unconstrained chain would pick first and builds the mask only
// when the constraint refuses it, where that is exact: greedy (the first
// allowed of the best few is the masked argmax) and a draw with no filter (a draw from
// p kept when allowed, else redrawn from p masked and renormalised, yields
// each allowed token with probability p/Z). With top-k, top-p or min-p the
// filters would see different candidates, so the mask comes first.
func (s *Sampler) constrained(logits []float32, history []int) int {
	if s.p.Greedy() {
		// The best few, best first: the first the grammar allows is the
		// masked argmax; only when it refuses them all is the mask built.
		for _, t := range s.best(logits, history, greedyChecks) {
			if s.con.Allows(t) {
				return t
			}
		}
		return s.maskedArgmax(logits, history, s.con.Mask())
	}
	if s.p.TopK == 0 && s.p.topP() >= 1 && s.p.MinP == 0 {
		if t := spec.Sample(s.chain(logits, history, false), s.rng); s.con.Allows(t) {
			return t
		}
	}
	return spec.Sample(s.chain(logits, history, true), s.rng)
}

// greedyChecks is how many of the best tokens greedy checks one by one
// before it builds the mask.
const greedyChecks = 8

// best returns the n best ids of the penalised logits, best first, the
// lower id first on ties (the order argmax breaks them in).
func (s *Sampler) best(logits []float32, history []int, n int) []int {
	if s.p.penalized() {
		w := s.penalize(logits, history)
		s.cand = topK(w, min(n, len(w)), s.cand[:0])
		return s.cand
	}
	top := s.cand[:0]
	for i, v := range logits {
		if len(top) == n && v <= logits[top[n-1]] {
			continue // not better than the worst kept (a tie keeps the lower id)
		}
		j := len(top)
		if j < n {
			top = append(top, i)
		} else {
			j = n - 1
		}
		for j > 0 && v > logits[top[j-1]] {
			top[j] = top[j-1]
			j--
		}
		top[j] = i
	}
	s.cand = top
	return top
}

// maskedArgmax is the argmax of the penalised logits over the ids mask
// allows (the lowest on ties), visiting only those: without penalties the
// row is not copied.
func (s *Sampler) maskedArgmax(logits []float32, history []int, mask []uint64) int {
	var w []float64
	if s.p.penalized() {
		w = s.penalize(logits, history)
	}
	best, bv := -1, math.Inf(-1)
	for wi, word := range mask {
		if lo := wi << 6; word == ^uint64(0) && w == nil && lo+64 <= len(logits) {
			// A whole word allowed (most of a string's body): a plain scan.
			for j, l := range logits[lo : lo+64] {
				if v := float64(l); best < 0 || v > bv {
					best, bv = lo+j, v
				}
			}
			continue
		}
		for word != 0 {
			i := wi<<6 | bits.TrailingZeros64(word)
			word &= word - 1
			if i >= len(logits) {
				break
			}
			v := float64(logits[i])
			if w != nil {
				v = w[i]
			}
			if best < 0 || v > bv {
				best, bv = i, v
			}
		}
	}
	return max(best, 0)
}

// maskOut sets the logits of the ids mask refuses to −∞.
func maskOut(w []float64, mask []uint64) {
	for i := range w {
		if i>>6 >= len(mask) || mask[i>>6]>>(i&63)&1 == 0 {
			w[i] = math.Inf(-1)
		}
	}
}
