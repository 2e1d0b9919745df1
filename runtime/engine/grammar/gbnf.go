package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FromGBNF compiles a grammar in llama.cpp's GBNF (grammars/README.md):
// rules `name ::= alternatives`, the start rule `root`; "literals" and
// [character classes] (ranges, ^ negation, escapes \n \r \t \\ \" \] \xHH
// \uHHHH \UHHHHHHHH), `.` (any character), rule names, ( groups ), |, and
// the repetitions *, +, ?, {m}, {m,}, {m,n}; # comments. Classes are over
// Unicode code points and match their UTF-8 bytes. Errors name the line and
// column.
func FromGBNF(src string) (*Grammar, error) {
	b := NewBuilder()
	root, err := b.GBNF(src)
	if err != nil {
		return nil, err
	}
	g, err := b.Build(root)
	if err != nil {
		return nil, fmt.Errorf("gbnf: %w", err)
	}
	return g, nil
}

// GBNF compiles a GBNF grammar (as FromGBNF) into rules of b and returns
// its root rule.
func (b *Builder) GBNF(src string) (Ref, error) {
	p := &gbnf{src: src, b: b, rules: map[string]Ref{}}
	if err := p.parse(); err != nil {
		return 0, err
	}
	root, ok := p.rules["root"]
	if !ok {
		return 0, fmt.Errorf("gbnf: no rule named root (the start rule)")
	}
	for _, name := range p.order {
		if !p.defined[name] {
			return 0, fmt.Errorf("gbnf: %s: rule %q is used but not defined", p.usedAt[name], name)
		}
	}
	if b.matchesNothing(root) {
		return 0, fmt.Errorf("gbnf: rule root matches nothing (a rule that reaches itself before a byte?)")
	}
	return root, nil
}

type gbnf struct {
	src     string
	i       int
	b       *Builder
	rules   map[string]Ref
	order   []string
	defined map[string]bool
	usedAt  map[string]string
	anon    int
}

func (p *gbnf) where(at int) string {
	line := 1 + strings.Count(p.src[:at], "\n")
	col := at - strings.LastIndex(p.src[:at], "\n")
	return fmt.Sprintf("line %d, column %d", line, col)
}

func (p *gbnf) errf(at int, format string, args ...any) error {
	return fmt.Errorf("gbnf: %s: %s", p.where(at), fmt.Sprintf(format, args...))
}

// space skips blanks and comments; newlines too when newlines is set.
func (p *gbnf) space(newlines bool) {
	for p.i < len(p.src) {
		switch c := p.src[p.i]; {
		case c == ' ' || c == '\t' || c == '\r':
			p.i++
		case c == '\n' && newlines:
			p.i++
		case c == '#':
			for p.i < len(p.src) && p.src[p.i] != '\n' {
				p.i++
			}
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *gbnf) name() string {
	start := p.i
	for p.i < len(p.src) && isNameByte(p.src[p.i]) {
		p.i++
	}
	return p.src[start:p.i]
}

func (p *gbnf) ref(name string, at int) Ref {
	r, ok := p.rules[name]
	if !ok {
		r = p.b.Rule(name)
		p.rules[name] = r
		p.order = append(p.order, name)
		p.usedAt[name] = p.where(at)
	}
	return r
}

func (p *gbnf) parse() error {
	p.defined, p.usedAt = map[string]bool{}, map[string]string{}
	for {
		p.space(true)
		if p.i >= len(p.src) {
			return nil
		}
		at := p.i
		name := p.name()
		if name == "" {
			return p.errf(at, "expected a rule name, got %q", p.src[at:min(at+10, len(p.src))])
		}
		p.space(false)
		if !strings.HasPrefix(p.src[p.i:], "::=") {
			return p.errf(p.i, "expected ::= after the rule name %q", name)
		}
		p.i += 3
		p.space(true)
		if p.defined[name] {
			return p.errf(at, "rule %q is defined twice", name)
		}
		r := p.ref(name, at)
		alts, err := p.alternatives(false)
		if err != nil {
			return err
		}
		p.b.Define(r, alts...)
		p.defined[name] = true
		if p.i < len(p.src) && p.src[p.i] != '\n' {
			return p.errf(p.i, "unexpected %q", p.src[p.i:p.i+1])
		}
	}
}

// alternatives parses seq | seq | …, up to a newline (outside parentheses)
// or a closing parenthesis (nested).
func (p *gbnf) alternatives(nested bool) ([][]Sym, error) {
	var alts [][]Sym
	for {
		seq, err := p.sequence(nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		p.space(nested)
		if p.i < len(p.src) && p.src[p.i] == '|' {
			p.i++
			p.space(true)
			continue
		}
		return alts, nil
	}
}

func (p *gbnf) sequence(nested bool) ([]Sym, error) {
	var seq []Sym
	for {
		p.space(nested)
		if p.i >= len(p.src) {
			return seq, nil
		}
		at := p.i
		var s Sym
		switch c := p.src[p.i]; {
		case c == '"':
			lit, err := p.literal()
			if err != nil {
				return nil, err
			}
			s = Lit(lit)
		case c == '[':
			r, err := p.class()
			if err != nil {
				return nil, err
			}
			s = R(r)
		case c == '.':
			p.i++
			s = R(p.codepoints("any", [][2]rune{{0, utf8.MaxRune}}))
		case c == '(':
			p.i++
			p.space(true)
			alts, err := p.alternatives(true)
			if err != nil {
				return nil, err
			}
			p.space(true)
			if p.i >= len(p.src) || p.src[p.i] != ')' {
				return nil, p.errf(at, "( is not closed")
			}
			p.i++
			p.anon++
			r := p.b.Rule(fmt.Sprintf("(group %d)", p.anon))
			p.b.Define(r, alts...)
			s = R(r)
		case isNameByte(c):
			name := p.name()
			rest := p.i
			p.space(false)
			if strings.HasPrefix(p.src[p.i:], "::=") {
				p.i = at // the next rule starts here
				return seq, nil
			}
			p.i = rest
			s = R(p.ref(name, at))
		default:
			return seq, nil // | ) newline: the caller's
		}
		s, err := p.repeat(s)
		if err != nil {
			return nil, err
		}
		seq = append(seq, s)
	}
}

// repeat applies a repetition operator after a symbol, if any.
func (p *gbnf) repeat(s Sym) (Sym, error) {
	if p.i >= len(p.src) {
		return s, nil
	}
	lo, hi := 0, 0
	switch p.src[p.i] {
	case '*':
		lo, hi = 0, -1
	case '+':
		lo, hi = 1, -1
	case '?':
		lo, hi = 0, 1
	case '{':
		at := p.i
		end := strings.IndexByte(p.src[p.i:], '}')
		if end < 0 {
			return s, p.errf(at, "{ is not closed")
		}
		body := p.src[p.i+1 : p.i+end]
		p.i += end
		a, b, comma := strings.Cut(body, ",")
		var err1, err2 error
		lo, err1 = strconv.Atoi(strings.TrimSpace(a))
		hi = lo
		if comma {
			hi = -1
			if t := strings.TrimSpace(b); t != "" {
				hi, err2 = strconv.Atoi(t)
			}
		}
		if err1 != nil || err2 != nil || lo < 0 || hi >= 0 && hi < lo || lo > maxCounted || hi > maxCounted {
			return s, p.errf(at, "bad repetition {%s}: expected {m}, {m,} or {m,n} with 0 ≤ m ≤ n ≤ %d", body, maxCounted)
		}
	default:
		return s, nil
	}
	p.i++
	p.anon++
	return R(p.b.Repeat(fmt.Sprintf("(repeat %d)", p.anon), s, lo, hi)), nil
}

// literal reads "…" as its UTF-8 bytes.
func (p *gbnf) literal() (string, error) {
	at := p.i
	p.i++
	var sb strings.Builder
	for {
		if p.i >= len(p.src) || p.src[p.i] == '\n' {
			return "", p.errf(at, "the literal is not closed")
		}
		if p.src[p.i] == '"' {
			p.i++
			return sb.String(), nil
		}
		r, err := p.char()
		if err != nil {
			return "", err
		}
		sb.WriteRune(r)
	}
}

// char reads one character of a literal or class, escapes decoded.
func (p *gbnf) char() (rune, error) {
	at := p.i
	if p.src[p.i] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.i:])
		if r == utf8.RuneError && n <= 1 {
			return 0, p.errf(at, "invalid UTF-8")
		}
		p.i += n
		return r, nil
	}
	if p.i+1 >= len(p.src) {
		return 0, p.errf(at, "a lone backslash")
	}
	c := p.src[p.i+1]
	p.i += 2
	switch c {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^', '/':
		return rune(c), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[c]
		if p.i+n > len(p.src) {
			return 0, p.errf(at, "\\%c needs %d hex digits", c, n)
		}
		v, err := strconv.ParseUint(p.src[p.i:p.i+n], 16, 32)
		if err != nil || v > utf8.MaxRune {
			return 0, p.errf(at, "\\%c needs %d hex digits", c, n)
		}
		p.i += n
		return rune(v), nil
	}
	return 0, p.errf(at, "unknown escape \\%c", c)
}

// class reads [...] into a rule over the UTF-8 encodings of its code points.
func (p *gbnf) class() (Ref, error) {
	at := p.i
	p.i++
	neg := p.i < len(p.src) && p.src[p.i] == '^'
	if neg {
		p.i++
	}
	var ranges [][2]rune
	for {
		if p.i >= len(p.src) || p.src[p.i] == '\n' {
			return 0, p.errf(at, "[ is not closed")
		}
		if p.src[p.i] == ']' {
			p.i++
			break
		}
		lo, err := p.char()
		if err != nil {
			return 0, err
		}
		hi := lo
		if p.i+1 < len(p.src) && p.src[p.i] == '-' && p.src[p.i+1] != ']' {
			p.i++
			if hi, err = p.char(); err != nil {
				return 0, err
			}
			if hi < lo {
				return 0, p.errf(at, "range %q-%q runs backwards", lo, hi)
			}
		}
		ranges = append(ranges, [2]rune{lo, hi})
	}
	if neg {
		ranges = complement(ranges)
	}
	if len(ranges) == 0 {
		return 0, p.errf(at, "the class matches no character")
	}
	return p.codepoints(p.src[at:p.i], ranges), nil
}

// complement is the code points outside ranges.
func complement(ranges [][2]rune) [][2]rune {
	var out [][2]rune
	next := rune(0)
	for _, r := range sortRanges(ranges) {
		if r[0] > next {
			out = append(out, [2]rune{next, r[0] - 1})
		}
		next = max(next, r[1]+1)
	}
	if next <= utf8.MaxRune {
		out = append(out, [2]rune{next, utf8.MaxRune})
	}
	return out
}

func sortRanges(r [][2]rune) [][2]rune {
	out := append([][2]rune(nil), r...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j][0] < out[j-1][0]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// codepoints is a rule matching the UTF-8 encoding of one code point in
// ranges (surrogates excluded): an alternative per run of byte ranges.
func (p *gbnf) codepoints(name string, ranges [][2]rune) Ref {
	var alts [][]Sym
	for _, r := range ranges {
		for _, part := range [][2]rune{{r[0], min(r[1], 0xD7FF)}, {max(r[0], 0xE000), r[1]}} {
			if part[0] <= part[1] {
				utf8Seqs(part[0], part[1], func(seq [][2]byte) {
					alt := make([]Sym, len(seq))
					for i, br := range seq {
						alt[i] = Class(br[0], br[1])
					}
					alts = append(alts, alt)
				})
			}
		}
	}
	r := p.b.Rule(name)
	p.b.Define(r, alts...)
	return r
}

// utf8Seqs calls f with byte-range sequences whose concatenation matches
// exactly the UTF-8 encodings of lo…hi (no surrogates inside), splitting
// the range where the encoding's length or a continuation byte's range
// changes (the utf8-ranges construction).
func utf8Seqs(lo, hi rune, f func([][2]byte)) {
	for _, edge := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= edge && hi > edge {
			utf8Seqs(lo, edge, f)
			utf8Seqs(edge+1, hi, f)
			return
		}
	}
	if hi < 0x80 {
		f([][2]byte{{byte(lo), byte(hi)}})
		return
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1 // the low bits the last i bytes hold
		if lo&^m != hi&^m {
			if lo&m != 0 {
				utf8Seqs(lo, lo|m, f)
				utf8Seqs((lo|m)+1, hi, f)
				return
			}
			if hi&m != m {
				utf8Seqs(lo, (hi&^m)-1, f)
				utf8Seqs(hi&^m, hi, f)
				return
			}
		}
	}
	a, b := make([]byte, n), make([]byte, n)
	utf8.EncodeRune(a, lo)
	utf8.EncodeRune(b, hi)
	seq := make([][2]byte, n)
	for i := range seq {
		seq[i] = [2]byte{a[i], b[i]}
	}
	f(seq)
}
