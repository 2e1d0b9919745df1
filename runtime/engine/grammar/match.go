package grammar

// node is one frame of a parse stack: the next element to match (pos) with
// its lexical state (sub, for kStr and kUntil), over the frames of the
// rules it was entered from. Nodes are immutable and shared between stacks.
type node struct {
	pos  int32
	sub  uint32
	up   *node
	hash uint64
}

// State is the set of parse stacks alive after a prefix: what llama.cpp
// calls the grammar's stacks. A nil stack has matched the whole grammar.
// A State is a value: advancing it makes a new one and leaves it as it was.
type State struct {
	g      *Grammar
	stacks []*node
}

// maxExpand bounds the rule nesting one expansion may enter: a grammar
// with left recursion would otherwise never end.
const maxExpand = 4096

func (g *Grammar) mk(pos int32, sub uint32, up *node) *node {
	h := uint64(0x51_7c_c1_b7_27_22_0a_95)
	if up != nil {
		h = up.hash
	}
	h ^= uint64(uint32(pos))<<32 | uint64(sub)
	h *= 0x9e3779b97f4a7c15
	h ^= h >> 29
	return &node{pos: pos, sub: sub, up: up, hash: h}
}

// next is n with its element matched: the following element of the same
// alternative, or (at its end) the frame it returns to, so a rule's last
// reference does not grow the stack.
func (g *Grammar) next(n *node) *node {
	if g.elems[n.pos+1].kind == kEnd {
		return n.up
	}
	return g.mk(n.pos+1, 0, n.up)
}

// expand adds to out the stacks n leads to whose top is a terminal (a byte
// class or a lexical element), entering rules and leaving finished ones;
// a nil stack (everything matched) is added as nil.
func (g *Grammar) expand(n *node, out []*node, depth int) []*node {
	for n != nil {
		e := g.elems[n.pos]
		switch e.kind {
		case kEnd:
			n = n.up
			continue
		case kRule:
			if depth > maxExpand {
				return out
			}
			cont := g.next(n)
			for _, a := range g.rules[e.arg] {
				out = g.expand(g.mk(a, 0, cont), out, depth+1)
			}
			return out
		}
		return addStack(out, n)
	}
	return addStack(out, nil)
}

// maxStacks bounds the stacks of one state. A pathological grammar (nested
// anyOf of distinct schemas) could otherwise double them at every level;
// past the bound further stacks are dropped, which only ever refuses text
// (never admits any the grammar refuses).
const maxStacks = 1024

func addStack(out []*node, n *node) []*node {
	if len(out) >= maxStacks {
		return out
	}
	for _, x := range out {
		if same(x, n) {
			return out
		}
	}
	return append(out, n)
}

func same(a, b *node) bool {
	for a != b {
		if a == nil || b == nil || a.hash != b.hash || a.pos != b.pos || a.sub != b.sub {
			return false
		}
		a, b = a.up, b.up
	}
	return true
}

// Start is the state before any byte.
func (g *Grammar) Start() State {
	var out []*node
	for _, a := range g.rules[g.root] {
		out = g.expand(g.mk(a, 0, nil), out, 0)
	}
	return State{g: g, stacks: out}
}

// Advance is the state after byte c; Dead when the grammar refuses it.
func (s State) Advance(c byte) State {
	return State{g: s.g, stacks: s.g.advance(s.stacks, c, nil)}
}

// AdvanceBytes is the state after the bytes b (Dead as soon as one is
// refused).
func (s State) AdvanceBytes(b []byte) State {
	for _, c := range b {
		if len(s.stacks) == 0 {
			return s
		}
		s = s.Advance(c)
	}
	return s
}

// Dead reports that no continuation matches: the prefix is refused.
func (s State) Dead() bool { return len(s.stacks) == 0 }

// Complete reports that the prefix is a whole sentence of the grammar.
func (s State) Complete() bool {
	for _, n := range s.stacks {
		if n == nil {
			return true
		}
	}
	return false
}

// Final reports that the prefix is complete and no byte may follow.
func (s State) Final() bool {
	for _, n := range s.stacks {
		if n != nil {
			return false
		}
	}
	return len(s.stacks) > 0
}

// advance appends to out the stacks of after byte c.
func (g *Grammar) advance(stacks []*node, c byte, out []*node) []*node {
	for _, n := range stacks {
		if n == nil {
			continue
		}
		e := g.elems[n.pos]
		switch e.kind {
		case kByte:
			if g.classes[e.arg].has(c) {
				out = g.expand(g.next(n), out, 0)
			}
		case kStr, kUntil:
			var sub uint32
			var closed, ok bool
			if e.kind == kStr {
				sub, closed, ok = strStep(g.strs[e.arg], n.sub, c)
			} else {
				sub, closed = g.untils[e.arg].step(n.sub, c)
				ok = true
			}
			switch {
			case !ok:
			case closed:
				out = g.expand(g.next(n), out, 0)
			case sub == n.sub:
				out = addStack(out, n)
			default:
				out = addStack(out, g.mk(n.pos, sub, n.up))
			}
		}
	}
	return out
}

// The lexical states of a string's body (kStr's sub, low 4 bits; the
// characters so far are sub>>4, saturated at the bound that matters).
const (
	sClean = iota // between characters
	sU1           // one UTF-8 continuation byte to go
	sU2           // two to go
	sU2E0         // two, the first A0–BF (after E0: no overlong form)
	sU2ED         // two, the first 80–9F (after ED: no surrogate)
	sU3           // three to go
	sU3F0         // three, the first 90–BF (after F0)
	sU3F4         // three, the first 80–8F (after F4: ≤ U+10FFFF)
	sEsc          // after a backslash
	sHex4         // \u with four hex digits to go; sHex4+1 … three, …
	sHex1  = sHex4 + 3
)

// strStep is a string body's transition on byte c: the new sub, whether c
// was the closing quote, and whether c is allowed at all.
func strStep(b strBounds, sub uint32, c byte) (uint32, bool, bool) {
	lex, n := sub&15, int32(sub>>4)
	char := func() (uint32, bool, bool) { // a character is complete
		n++
		lim := b.max
		if lim < 0 {
			lim = b.min // past min, the count no longer matters
		}
		n = min(n, lim)
		return uint32(n) << 4, false, true
	}
	cont := c >= 0x80 && c <= 0xBF
	with := func(l uint32) (uint32, bool, bool) { return uint32(n)<<4 | l, false, true }
	switch lex {
	case sClean:
		if c == '"' {
			return 0, n >= b.min, n >= b.min
		}
		if b.max >= 0 && n >= b.max {
			return 0, false, false
		}
		switch {
		case c == '\\':
			return with(sEsc)
		case c < 0x20:
			return 0, false, false
		case c < 0x80:
			return char()
		case c >= 0xC2 && c <= 0xDF:
			return with(sU1)
		case c == 0xE0:
			return with(sU2E0)
		case c == 0xED:
			return with(sU2ED)
		case c >= 0xE1 && c <= 0xEF:
			return with(sU2)
		case c == 0xF0:
			return with(sU3F0)
		case c >= 0xF1 && c <= 0xF3:
			return with(sU3)
		case c == 0xF4:
			return with(sU3F4)
		}
	case sU1:
		if cont {
			return char()
		}
	case sU2:
		if cont {
			return with(sU1)
		}
	case sU2E0:
		if c >= 0xA0 && c <= 0xBF {
			return with(sU1)
		}
	case sU2ED:
		if c >= 0x80 && c <= 0x9F {
			return with(sU1)
		}
	case sU3:
		if cont {
			return with(sU2)
		}
	case sU3F0:
		if c >= 0x90 && c <= 0xBF {
			return with(sU2)
		}
	case sU3F4:
		if c >= 0x80 && c <= 0x8F {
			return with(sU2)
		}
	case sEsc:
		switch c {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			return char()
		case 'u':
			return with(sHex4)
		}
	default: // \u's hex digits
		if c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' {
			if lex == sHex1 {
				return char()
			}
			return with(lex + 1)
		}
	}
	return 0, false, false
}

// step is kUntil's transition: sub is how much of the terminator the text
// ends with; closed says c completed it.
func (u *until) step(sub uint32, c byte) (uint32, bool) {
	m := int32(sub)
	for m > 0 && u.lit[m] != c {
		m = u.fail[m-1]
	}
	if u.lit[m] == c {
		m++
	}
	if int(m) == len(u.lit) {
		return 0, true
	}
	return uint32(m), false
}
