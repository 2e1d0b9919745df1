// Package grammar constrains generation to a context-free language over
// bytes: JSON (any value or object), JSON Schema, llama.cpp's GBNF, and
// sequences of literal markup around them (a chat template's tool-call
// tags). A Grammar is a set
// of rules, each a list of alternatives, each a sequence of byte classes,
// rule references and two lexical elements (a JSON string's body, and free
// text up to a terminator); a State is the set of parse stacks a prefix
// leaves alive, as in llama.cpp's GBNF matcher. States are immutable and
// their stacks shared, so copying one (for a speculative draft, a walk of
// the vocabulary) costs nothing.
//
// Vocab and Constraint turn a State into a token mask over a tokenizer's
// vocabulary: a byte trie walked with the state, pruned where the state
// dies, and a fast path for the lexical states a token can pass through
// unchanged (inside a string: every token of plain string characters).
package grammar

import "fmt"

type kind uint8

const (
	kEnd   kind = iota // the end of an alternative
	kByte              // one byte of a class
	kRule              // a rule reference
	kStr               // a JSON string's body after the opening quote, through the closing quote
	kUntil             // any text, through the first occurrence of a terminator
)

type elem struct {
	kind kind
	// arg is the class (kByte), the rule (kRule), the terminator (kUntil),
	// or the string's length bounds (kStr: into Grammar.strs).
	arg int32
}

// strBounds are a string's length bounds in characters (max < 0: none).
type strBounds struct{ min, max int32 }

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(lo, hi byte) {
	for c := int(lo); c <= int(hi); c++ {
		s[c>>6] |= 1 << (c & 63)
	}
}

func (s *byteSet) has(c byte) bool { return s[c>>6]>>(c&63)&1 != 0 }

// Grammar is a compiled grammar; immutable and safe for concurrent use.
type Grammar struct {
	elems   []elem
	rules   [][]int32 // rule → the start of each alternative in elems
	names   []string  // rule names, for errors and debugging
	classes []byteSet
	strs    []strBounds
	untils  []until
	root    int32
}

// until is kUntil's terminator with its KMP failure table.
type until struct {
	lit  string
	fail []int32
}

// Builder assembles a Grammar: declare rules (Rule), define their
// alternatives (Define), and Build with the root.
type Builder struct {
	g       *Grammar
	classes map[byteSet]int32
	defined []bool
	jr      jsonRules
}

// Ref names a rule of a Builder.
type Ref int32

// Sym is one element of an alternative: a Lit, a Class, a Ref, a Str or an
// Until.
type Sym struct {
	lit   string
	class *byteSet
	ref   Ref
	str   *strBounds
	until *string
	kind  kind
}

// Lit matches s byte for byte.
func Lit(s string) Sym { return Sym{lit: s, kind: kByte} }

// Class matches one byte in the ranges given as pairs lo, hi (inclusive).
func Class(ranges ...byte) Sym {
	var s byteSet
	for i := 0; i+1 < len(ranges); i += 2 {
		s.add(ranges[i], ranges[i+1])
	}
	return Sym{class: &s, kind: kByte}
}

// R references rule r.
func R(r Ref) Sym { return Sym{ref: r, kind: kRule} }

// Str matches a JSON string's body after its opening quote, through the
// closing quote: min to max characters (max < 0: no bound), escapes and
// UTF-8 checked.
func Str(min, max int) Sym { return Sym{str: &strBounds{int32(min), int32(max)}, kind: kStr} }

// Until matches any bytes through the first occurrence of term (non-empty).
func Until(term string) Sym { return Sym{until: &term, kind: kUntil} }

// NewBuilder starts an empty grammar.
func NewBuilder() *Builder {
	return &Builder{g: &Grammar{}, classes: map[byteSet]int32{}}
}

// Rule declares a rule (defined later by Define, so rules may refer to
// each other).
func (b *Builder) Rule(name string) Ref {
	b.g.rules = append(b.g.rules, nil)
	b.g.names = append(b.g.names, name)
	b.defined = append(b.defined, false)
	return Ref(len(b.g.rules) - 1)
}

// Define gives rule r its alternatives, each a sequence of symbols (an
// empty sequence matches the empty string). A rule must not reach itself
// before consuming a byte (no left recursion).
func (b *Builder) Define(r Ref, alts ...[]Sym) {
	g := b.g
	for _, alt := range alts {
		g.rules[r] = append(g.rules[r], int32(len(g.elems)))
		for _, s := range alt {
			switch {
			case s.kind == kByte && s.class == nil:
				for i := 0; i < len(s.lit); i++ {
					var set byteSet
					set.add(s.lit[i], s.lit[i])
					g.elems = append(g.elems, elem{kind: kByte, arg: b.class(set)})
				}
			case s.kind == kByte:
				g.elems = append(g.elems, elem{kind: kByte, arg: b.class(*s.class)})
			case s.kind == kRule:
				g.elems = append(g.elems, elem{kind: kRule, arg: int32(s.ref)})
			case s.kind == kStr:
				g.strs = append(g.strs, *s.str)
				g.elems = append(g.elems, elem{kind: kStr, arg: int32(len(g.strs) - 1)})
			case s.kind == kUntil && *s.until == "":
				// Through the first occurrence of "": nothing.
			case s.kind == kUntil:
				g.untils = append(g.untils, newUntil(*s.until))
				g.elems = append(g.elems, elem{kind: kUntil, arg: int32(len(g.untils) - 1)})
			}
		}
		g.elems = append(g.elems, elem{kind: kEnd})
	}
	b.defined[r] = true
}

// Seq is a new rule of one alternative.
func (b *Builder) Seq(name string, syms ...Sym) Ref {
	r := b.Rule(name)
	b.Define(r, syms)
	return r
}

// Alt is a new rule whose alternatives are the given rules.
func (b *Builder) Alt(name string, refs ...Ref) Ref {
	r := b.Rule(name)
	alts := make([][]Sym, len(refs))
	for i, x := range refs {
		alts[i] = []Sym{R(x)}
	}
	b.Define(r, alts...)
	return r
}

// Opt is a new rule matching s or nothing.
func (b *Builder) Opt(name string, s ...Sym) Ref {
	r := b.Rule(name)
	b.Define(r, s, nil)
	return r
}

// Repeat is a new rule matching between min and max copies of s (max < 0:
// no bound).
func (b *Builder) Repeat(name string, s Sym, min, max int) Ref {
	if max < 0 {
		star := b.Rule(name + "*")
		b.Define(star, []Sym{s, R(star)}, nil)
		seq := make([]Sym, 0, min+1)
		for range min {
			seq = append(seq, s)
		}
		return b.Seq(name, append(seq, R(star))...)
	}
	// Nested optionals: rest_k matches up to k more copies.
	rest := b.Seq(name + "{0}")
	for k := 1; k <= max-min; k++ {
		next := b.Rule(fmt.Sprintf("%s{0,%d}", name, k))
		b.Define(next, []Sym{s, R(rest)}, nil)
		rest = next
	}
	seq := make([]Sym, 0, min+1)
	for range min {
		seq = append(seq, s)
	}
	return b.Seq(name, append(seq, R(rest))...)
}

func (b *Builder) class(s byteSet) int32 {
	if i, ok := b.classes[s]; ok {
		return i
	}
	b.g.classes = append(b.g.classes, s)
	i := int32(len(b.g.classes) - 1)
	b.classes[s] = i
	return i
}

// Build returns the grammar with root as its start rule. Every declared
// rule must be defined.
func (b *Builder) Build(root Ref) (*Grammar, error) {
	for i, ok := range b.defined {
		if !ok {
			return nil, fmt.Errorf("grammar: rule %q is declared but not defined", b.g.names[i])
		}
	}
	if len(b.g.elems) > MaxElems {
		return nil, fmt.Errorf("grammar: %d elements, more than the %d allowed", len(b.g.elems), MaxElems)
	}
	g := b.g
	g.root = int32(root)
	if g.Start().Dead() {
		return nil, fmt.Errorf("grammar: rule %q matches nothing (a rule that reaches itself before a byte?)", g.names[root])
	}
	b.g = nil
	return g, nil
}

// matchesNothing reports that rule r, as defined so far, cannot start:
// no alternative reaches a byte (left recursion).
func (b *Builder) matchesNothing(r Ref) bool {
	g := b.g
	var out []*node
	for _, a := range g.rules[r] {
		out = g.expand(g.mk(a, 0, nil), out, 0)
	}
	return len(out) == 0
}

// MaxElems bounds a grammar's size (its elements, about a byte or a
// reference each): a schema's maxItems makes a rule per item.
const MaxElems = 1 << 22

func newUntil(lit string) until {
	// KMP failure: fail[i] is the longest proper border of lit[:i+1].
	f := make([]int32, len(lit))
	k := int32(0)
	for i := 1; i < len(lit); i++ {
		for k > 0 && lit[i] != lit[k] {
			k = f[k-1]
		}
		if lit[i] == lit[k] {
			k++
		}
		f[i] = k
	}
	return until{lit: lit, fail: f}
}

// Literals is a new rule matching one of lits, then (when then is not
// nil) then[i] after lits[i]. The literals share their common prefixes
// (a byte trie), so a long enum or a list of tool names has a parse stack
// per byte that may come next, not per literal still possible. A repeated
// literal keeps its first continuation.
func (b *Builder) Literals(name string, lits []string, then []Ref) Ref {
	type tnode struct {
		kids []*tnode // in the order first seen
		by   map[byte]*tnode
		c    byte
		end  int // the literal ending here + 1; 0: none
	}
	root := &tnode{by: map[byte]*tnode{}}
	for i, lit := range lits {
		n := root
		for j := 0; j < len(lit); j++ {
			k, ok := n.by[lit[j]]
			if !ok {
				k = &tnode{by: map[byte]*tnode{}, c: lit[j]}
				n.by[lit[j]] = k
				n.kids = append(n.kids, k)
			}
			n = k
		}
		if n.end == 0 {
			n.end = i + 1
		}
	}
	var mk func(n *tnode, id string) Ref
	mk = func(n *tnode, id string) Ref {
		r := b.Rule(name + id)
		var alts [][]Sym
		if n.end > 0 {
			var tail []Sym
			if then != nil {
				tail = []Sym{R(then[n.end-1])}
			}
			alts = append(alts, tail)
		}
		for i, k := range n.kids {
			// A run of single children is one literal.
			run := []byte{k.c}
			for len(k.kids) == 1 && k.end == 0 {
				k = k.kids[0]
				run = append(run, k.c)
			}
			alts = append(alts, []Sym{Lit(string(run)), R(mk(k, fmt.Sprintf("%s.%d", id, i)))})
		}
		b.Define(r, alts...)
		return r
	}
	return mk(root, "")
}
