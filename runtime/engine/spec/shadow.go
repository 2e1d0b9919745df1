package spec

// Shadow judges drafts that were not fed against the tokens decoding
// commits after them, and reports them to a gate (see Gate.ObserveShadow):
// all of a plain step's drafts, or those past the fed ones of a window that
// accepted every draft it carried. One chain at a time; the zero value is
// idle.
type Shadow struct {
	drafts  []int
	probs   []float64
	source  int
	from    int // drafts before it were fed and accepted
	matched int // drafts from on that stood so far
}

// Pending reports whether a chain is waiting for tokens.
func (c *Shadow) Pending() bool { return c.drafts != nil }

// Start begins a chain over drafts[from:] (with the drafter's probabilities
// for all drafts, nil when it gives none) from source: drafts[from] is the
// guess for the next token to be committed.
func (c *Shadow) Start(source int, drafts []int, probs []float64, from int) {
	if from >= len(drafts) {
		return
	}
	*c = Shadow{drafts: append([]int(nil), drafts...), source: source, from: from}
	if len(probs) >= len(drafts) {
		c.probs = append([]float64(nil), probs[:len(drafts)]...)
	}
}

// Advance judges the chain against committed tokens, in order: a draft
// stands iff it is the token that came, and the chain ends at the first
// that does not or when all stood.
func (c *Shadow) Advance(g *Gate, tokens []int) {
	for _, tok := range tokens {
		if c.drafts == nil {
			return
		}
		at := c.from + c.matched
		hit := c.drafts[at] == tok
		if hit {
			c.matched++
			at++
		}
		if !hit || at == len(c.drafts) {
			g.ObserveShadow(c.source, c.from, min(at+1, len(c.drafts)), at, c.probs)
			*c = Shadow{}
		}
	}
}
