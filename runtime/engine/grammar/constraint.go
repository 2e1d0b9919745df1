package grammar

import (
	"fmt"
	"slices"
)

// Constraint is one generation's grammar state over a Vocab: which tokens
// may come next, advanced by each token the sampler commits. The stop ids
// (EOS) are allowed exactly when the text so far is complete. Not safe for
// concurrent use; one per sequence.
type Constraint struct {
	g     *Grammar
	v     *Vocab
	st    State
	stops []int
	done  bool // a stop id was accepted
	bad   error

	cache   map[uint64][]cached // masks by state, for states that come back (a string's body)
	cached  int
	scratch [][]*node
}

type cached struct {
	stacks []*node
	mask   []uint64
}

// maxCached bounds the masks a Constraint keeps (about 30 KiB each at a
// 248K vocabulary).
const maxCached = 64

// NewConstraint starts g over v; stops are the ids that end generation
// (allowed once the text is complete).
func NewConstraint(g *Grammar, v *Vocab, stops []int) *Constraint {
	return &Constraint{g: g, v: v, st: g.Start(), stops: slices.Clone(stops), cache: map[uint64][]cached{}}
}

// State is the grammar state after the tokens accepted so far.
func (c *Constraint) State() State { return c.st }

func (c *Constraint) isStop(tok int) bool { return slices.Contains(c.stops, tok) }

// Allows reports whether tok may come next.
func (c *Constraint) Allows(tok int) bool {
	if c.done || c.bad != nil {
		return false
	}
	if c.isStop(tok) {
		return c.st.Complete()
	}
	b := c.v.Bytes(tok)
	if b == nil {
		return false
	}
	return !c.st.AdvanceBytes(b).Dead()
}

// Accept advances the state by tok; an error (the token is refused) leaves
// the constraint finished.
func (c *Constraint) Accept(tok int) error {
	if !c.Allows(tok) {
		if c.bad == nil {
			c.bad = fmt.Errorf("grammar: token %d (%q) is not allowed here", tok, c.v.Bytes(tok))
		}
		return c.bad
	}
	if c.isStop(tok) {
		c.done = true
		return nil
	}
	c.st = c.st.AdvanceBytes(c.v.Bytes(tok))
	return nil
}

// Admit is how many of the leading tokens of drafts the grammar allows in
// a row from the current state (the state itself does not move).
func (c *Constraint) Admit(drafts []int) int {
	if c.done || c.bad != nil {
		return 0
	}
	st := c.st
	for i, t := range drafts {
		if c.isStop(t) {
			if st.Complete() {
				return i + 1
			}
			return i
		}
		b := c.v.Bytes(t)
		if b == nil {
			return i
		}
		if st = st.AdvanceBytes(b); st.Dead() {
			return i
		}
	}
	return len(drafts)
}

// Finished reports that generation must end: a stop id was accepted, the
// text is complete and nothing may follow it, or a refused token was
// forced in.
func (c *Constraint) Finished() bool { return c.done || c.bad != nil || c.st.Final() }

// Err is the error of a refused token Accept was given, if any.
func (c *Constraint) Err() error { return c.bad }

// Mask returns the allowed ids as a bitset (bit id%64 of word id/64) over
// the vocabulary; ids past it are never allowed. The slice is shared with
// the constraint's cache: read it before the next Accept, never write it.
func (c *Constraint) Mask() []uint64 {
	if c.done || c.bad != nil {
		return make([]uint64, words(c.v.n))
	}
	key := uint64(0)
	for _, n := range c.st.stacks {
		if n != nil {
			key += n.hash
		} else {
			key += 0x2545f4914f6cdd1d
		}
	}
	for _, e := range c.cache[key] {
		if sameSet(e.stacks, c.st.stacks) {
			return e.mask
		}
	}
	mask := c.compute(make([]uint64, words(c.v.n)))
	if c.cached >= maxCached {
		clear(c.cache)
		c.cached = 0
	}
	c.cache[key] = append(c.cache[key], cached{stacks: slices.Clone(c.st.stacks), mask: mask})
	c.cached++
	return mask
}

// compute fills mask (zeroed) with the allowed ids, without the cache.
func (c *Constraint) compute(mask []uint64) []uint64 {
	if c.done || c.bad != nil {
		return mask
	}
	if l := c.loop(); l != nil {
		copy(mask, l.inside)
		l.rest.walk(c.g, c.st.stacks, mask, &c.scratch)
	} else {
		c.v.all.walk(c.g, c.st.stacks, mask, &c.scratch)
	}
	if c.st.Complete() {
		for _, t := range c.stops {
			if t >= 0 && t < c.v.n {
				mask[t>>6] |= 1 << (t & 63)
			}
		}
	}
	return mask
}

// loop is the fast path when every stack sits in the same lexical state
// of a string's body or of text before a terminator (a string with an
// upper length bound only as the one stack): the tokens that stay inside the element are allowed whatever
// follows it, and only those that leave it are walked. Nil when there is
// none.
func (c *Constraint) loop() *loop {
	var key loopKey
	room := -1 // a bounded string's characters left
	for i, n := range c.st.stacks {
		if n == nil {
			return nil
		}
		e := c.g.elems[n.pos]
		var k loopKey
		switch e.kind {
		case kStr:
			k = loopKey{kind: kStr, sub: n.sub & 15}
			if bd := c.g.strs[e.arg]; bd.max >= 0 {
				// Only alone: the room left must be one.
				if len(c.st.stacks) > 1 {
					return nil
				}
				k.bounded = true
				room = int(bd.max - int32(n.sub>>4))
				if n.sub&15 != sClean {
					room-- // the unfinished character was started, not yet counted
				}
			}
		case kUntil:
			k = loopKey{kind: kUntil, sub: n.sub, term: c.g.untils[e.arg].lit}
		default:
			return nil
		}
		if i > 0 && k != key {
			return nil
		}
		key = k
	}
	if len(c.st.stacks) == 0 {
		return nil
	}
	l := c.v.loop(key)
	if key.bounded {
		// Inside tokens that fit the room; longer ones are refused by the
		// bound (those past maxLoopChars are in rest, walked).
		return &loop{inside: l.upTo[min(room, maxLoopChars)], rest: l.rest}
	}
	return l
}

func sameSet(a, b []*node) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		found := false
		for _, y := range b {
			if same(x, y) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
