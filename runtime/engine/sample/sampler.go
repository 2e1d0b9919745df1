package sample

import (
	"cmp"
	"math"
	"math/rand"
	"slices"

	"github.com/strata-llm/strata/internal/greedy"
	"github.com/strata-llm/strata/runtime/engine/spec"
)

// Sampler runs the chain of its Params over rows of logits. It owns the
// random source, so one Sampler serves one sequence; not safe for
// concurrent use.
type Sampler struct {
	p      Params
	rng    *rand.Rand
	work   []float64   // the row's logits after the penalties
	probs  []float64   // the chain's distribution over the vocabulary
	cand   []int       // the candidates the filters keep, best first
	counts map[int]int // occurrences of each token in the penalty window
	con    Constraint  // the grammar the tokens must follow; nil: none
}

// New checks p and returns its sampler, its draw seeded by p.Seed.
func New(p Params) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &Sampler{p: p, rng: rand.New(rand.NewSource(p.Seed)), counts: map[int]int{}}, nil
}

// Params returns the sampler's parameters.
func (s *Sampler) Params() Params { return s.p }

// Sample picks the token after history (prompt and output so far, oldest
// first) from its row of logits: the argmax of the penalised logits when
// greedy, else a draw from Probs.
func (s *Sampler) Sample(logits []float32, history []int) int {
	if s.con != nil {
		t := s.constrained(logits, history)
		s.con.Accept(t) // a refusal (impossible: t was allowed) finishes the constraint
		return t
	}
	if s.p.Greedy() {
		return s.greedy(logits, history)
	}
	return spec.Sample(s.Probs(logits, history), s.rng)
}

// Verify is one step of speculative sampling under the chain: the row's
// logits, the history before it (the drafts before this one included) and
// the draft the row's window carried. The returned token is distributed
// exactly as Sample's; accepted says it is the draft. Greedy, it is the
// argmax and accepted iff the draft is that argmax. Under a constraint the
// row's token is drawn as Sample draws it and the draft stands iff it is
// that token: for a drafter that proposes one token with certainty this is
// speculative sampling's own rule (the draft is kept with probability
// p(draft), else the token is distributed as the residual), and the random
// stream is the one plain decoding uses, so the tokens are those of
// decoding without drafts.
func (s *Sampler) Verify(logits []float32, history []int, draft int) (tok int, accepted bool) {
	if s.con != nil {
		tok = s.Sample(logits, history)
		return tok, tok == draft
	}
	if s.p.Greedy() {
		tok = s.greedy(logits, history)
		return tok, tok == draft
	}
	return spec.Verify(s.Probs(logits, history), nil, draft, s.rng)
}

// Probs returns the chain's distribution over the vocabulary for a row of
// logits after history: zero outside what the filters keep. Greedy, it is
// one-hot on Sample's choice. Under a constraint the refused ids have
// probability 0. The slice is reused by the next call.
func (s *Sampler) Probs(logits []float32, history []int) []float64 {
	return s.chain(logits, history, s.con != nil)
}

func (s *Sampler) chain(logits []float32, history []int, masked bool) []float64 {
	w := s.penalize(logits, history)
	if masked {
		maskOut(w, s.con.Mask())
	}
	s.probs = resize(s.probs, len(w))
	p := s.probs
	if !s.p.Greedy() && s.p.TopK == 0 && s.p.topP() >= 1 && s.p.MinP == 0 {
		// No filter: the softmax of the whole row, without a candidate list.
		mx := w[argmax(w)]
		var z float64
		for i, v := range w {
			p[i] = math.Exp((v - mx) / s.p.Temperature)
			z += p[i]
		}
		for i := range p {
			p[i] /= z
		}
		return p
	}
	clear(p)
	if s.p.Greedy() {
		p[argmax(w)] = 1
		return p
	}
	cand := s.filter(w)
	// Temperature last, over the survivors; the max is subtracted for range.
	mx := math.Inf(-1)
	for _, id := range cand {
		mx = math.Max(mx, w[id])
	}
	var z float64
	for _, id := range cand {
		p[id] = math.Exp((w[id] - mx) / s.p.Temperature)
		z += p[id]
	}
	for _, id := range cand {
		p[id] /= z
	}
	return p
}

// greedy is the argmax of the penalised logits; without penalties, of the
// logits as they are (no copy).
func (s *Sampler) greedy(logits []float32, history []int) int {
	if !s.p.penalized() {
		best, _ := greedy.Choose(logits)
		return best
	}
	return argmax(s.penalize(logits, history))
}

// penalize copies logits to float64 and applies the penalties over the last
// PenaltyLastN tokens of history: per distinct token the repetition penalty,
// then minus count·frequency and presence.
func (s *Sampler) penalize(logits []float32, history []int) []float64 {
	s.work = resize(s.work, len(logits))
	w := s.work
	for i, v := range logits {
		w[i] = float64(v)
	}
	if !s.p.penalized() {
		return w
	}
	window := history
	if n := s.p.PenaltyLastN; n >= 0 && n < len(window) {
		window = window[len(window)-n:]
	}
	clear(s.counts)
	for _, t := range window {
		if t >= 0 && t < len(w) {
			s.counts[t]++
		}
	}
	rp := s.p.repeat()
	for t, c := range s.counts {
		if w[t] <= 0 {
			w[t] *= rp
		} else {
			w[t] /= rp
		}
		w[t] -= float64(c)*s.p.FrequencyPenalty + s.p.PresencePenalty
	}
	return w
}

// filter runs top-k, top-p and min-p over the penalised logits w and returns
// the ids they keep (best first when top-k or top-p sorted them).
func (s *Sampler) filter(w []float64) []int {
	V := len(w)
	k, topP, minP := s.p.TopK, s.p.topP(), s.p.MinP
	if k >= V {
		k = 0
	}
	cand := s.cand[:0]
	switch {
	case k > 0:
		cand = topP1(w, topK(w, k, cand), topP)
	case topP < 1:
		cand = nucleus(w, topP, cand)
	default:
		for i := range V {
			cand = append(cand, i)
		}
	}
	if minP > 0 {
		mx := math.Inf(-1)
		for _, id := range cand {
			mx = math.Max(mx, w[id])
		}
		// p ≥ minP·p_max ⇔ logit ≥ max + ln(minP); the argmax always stays.
		floor := mx + math.Log(minP)
		kept := cand[:0]
		for _, id := range cand {
			if w[id] >= floor {
				kept = append(kept, id)
			}
		}
		cand = kept
	}
	s.cand = cand
	return cand
}

// topP1 cuts the candidates (sorted, best first) to the shortest prefix
// whose probability at temperature 1, over the candidates, reaches topP.
func topP1(w []float64, cand []int, topP float64) []int {
	if topP >= 1 {
		return cand
	}
	mx := w[cand[0]]
	var z float64
	for _, id := range cand {
		z += math.Exp(w[id] - mx)
	}
	return prefix(w, cand, mx, z, topP)
}

func prefix(w []float64, cand []int, mx, z, topP float64) []int {
	var c float64
	for i, id := range cand {
		c += math.Exp(w[id]-mx) / z
		if c >= topP {
			return cand[:i+1]
		}
	}
	return cand // rounding left the total under topP: keep all
}

// nucleus is top-p over the whole row. Only the head of the sorted order
// matters, so it sorts the best m ids and grows m until their mass reaches
// topP: the same prefix as sorting everything, without sorting everything.
func nucleus(w []float64, topP float64, dst []int) []int {
	mx := math.Inf(-1)
	for _, v := range w {
		mx = math.Max(mx, v)
	}
	var z float64
	for _, v := range w {
		z += math.Exp(v - mx)
	}
	for m := 64; ; m *= 8 {
		if m >= len(w) {
			dst = dst[:0]
			for i := range w {
				dst = append(dst, i)
			}
			slices.SortFunc(dst, func(a, b int) int { return better(w, a, b) })
			return prefix(w, dst, mx, z, topP)
		}
		dst = topK(w, m, dst)
		if got := prefix(w, dst, mx, z, topP); len(got) < m {
			return got
		}
	}
}

// better orders ids by logit, largest first, lower id first on ties.
func better(w []float64, a, b int) int {
	if c := cmp.Compare(w[b], w[a]); c != 0 {
		return c
	}
	return cmp.Compare(a, b)
}

// topK returns the k best ids of w (k < len(w)), best first, in dst: a
// bounded heap whose root is the worst kept, so O(V log k).
func topK(w []float64, k int, dst []int) []int {
	h := dst[:0]
	worse := func(a, b int) bool { return better(w, a, b) > 0 } // a ranks after b
	down := func(i int) {
		for {
			c := 2*i + 1
			if c >= len(h) {
				return
			}
			if c+1 < len(h) && worse(h[c+1], h[c]) {
				c++
			}
			if !worse(h[c], h[i]) {
				return
			}
			h[i], h[c] = h[c], h[i]
			i = c
		}
	}
	for id := range w {
		if len(h) < k {
			h = append(h, id)
			for i := len(h) - 1; i > 0; {
				p := (i - 1) / 2
				if !worse(h[i], h[p]) {
					break
				}
				h[i], h[p] = h[p], h[i]
				i = p
			}
			continue
		}
		if w[id] <= w[h[0]] {
			// Not better than the worst kept: ids come in increasing order,
			// so a tie loses to the lower id already kept (a masked row's
			// many −∞ ties cost no comparison).
			continue
		}
		h[0] = id
		down(0)
	}
	slices.SortFunc(h, func(a, b int) int { return better(w, a, b) })
	return h
}

func argmax(w []float64) int {
	best := 0
	for i, v := range w {
		if v > w[best] {
			best = i
		}
	}
	return best
}

func resize(b []float64, n int) []float64 {
	if cap(b) < n {
		return make([]float64, n)
	}
	return b[:n]
}
