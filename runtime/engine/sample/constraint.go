package sample

import (
	"math"

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
// when the constraint refuses it, where that is exact: greedy (the argmax,
// if allowed, is the masked argmax) and a draw with no filter (a draw from
// p kept when allowed, else redrawn from p masked and renormalised, yields
// each allowed token with probability p/Z). With top-k, top-p or min-p the
// filters would see different candidates, so the mask comes first.
func (s *Sampler) constrained(logits []float32, history []int) int {
	if s.p.Greedy() {
		if t := s.greedy(logits, history); s.con.Allows(t) {
			return t
		}
		w := s.penalize(logits, history)
		maskOut(w, s.con.Mask())
		return argmax(w)
	}
	if s.p.TopK == 0 && s.p.topP() >= 1 && s.p.MinP == 0 {
		if t := spec.Sample(s.chain(logits, history, false), s.rng); s.con.Allows(t) {
			return t
		}
	}
	return spec.Sample(s.chain(logits, history, true), s.rng)
}

// maskOut sets the logits of the ids mask refuses to −∞.
func maskOut(w []float64, mask []uint64) {
	for i := range w {
		if i>>6 >= len(mask) || mask[i>>6]>>(i&63)&1 == 0 {
			w[i] = math.Inf(-1)
		}
	}
}
