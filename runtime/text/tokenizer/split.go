package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// qwenPattern is the Split pre-tokenizer regex that Qwen2/Qwen3 (and tiny-go)
// ship. splitQwen implements exactly this regex's leftmost-first matching,
// including the \s+(?!\S) lookahead, as a single forward scan: Go's regexp has
// no lookahead, and a backtracking engine is several times slower and can go
// quadratic on long whitespace runs. TestSplitMatchesRegexp2 checks the scanner
// against a backtracking regex engine on the references and random strings.
const qwenPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

type class uint8

const (
	clOther class = iota // not a letter, number or white space
	clLetter
	clNumber
	clSpace
)

var asciiClass [utf8.RuneSelf]class

func init() {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		asciiClass[r] = classOf(r)
	}
}

// classOf follows Oniguruma's Unicode classes: \p{L} = L*, \p{N} = N*, \s =
// the White_Space property (which unicode.IsSpace implements).
func classOf(r rune) class {
	switch {
	case unicode.IsLetter(r):
		return clLetter
	case unicode.IsNumber(r):
		return clNumber
	case unicode.IsSpace(r):
		return clSpace
	}
	return clOther
}

// at decodes the rune at s[i]; invalid bytes count as one "other" character.
func at(s string, i int) (rune, int, class) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && w == 1 {
		return r, 1, clOther
	}
	return r, w, classOf(r)
}

// splitQwen appends the end offsets of the pieces of s to ends.
func splitQwen(s string, ends []int) []int {
	for i := 0; i < len(s); {
		i = nextPiece(s, i)
		ends = append(ends, i)
	}
	return ends
}

func nextPiece(s string, i int) int {
	r, w, c := at(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if n := contraction(s[i+1:]); n > 0 {
			return i + 1 + n
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == clLetter {
		return letters(s, i+w)
	}
	if c != clNumber && r != '\r' && r != '\n' && i+w < len(s) {
		if _, w2, c2 := at(s, i+w); c2 == clLetter {
			return letters(s, i+w+w2)
		}
	}
	// \p{N}
	if c == clNumber {
		return i + w
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if c == clOther {
		return punct(s, i+w)
	}
	if r == ' ' && i+1 < len(s) {
		if _, w2, c2 := at(s, i+1); c2 == clOther {
			return punct(s, i+1+w2)
		}
	}
	// White space: \s*[\r\n]+ | \s+(?!\S) | \s+
	lastNL, lastStart, j := -1, i, i
	for j < len(s) {
		r, w, c := at(s, j)
		if c != clSpace {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = j
		}
		lastStart = j
		j += w
	}
	switch {
	case lastNL >= 0:
		return lastNL + 1
	case j == len(s):
		return j
	case lastStart > i:
		return lastStart // leave the last space to prefix the next word
	}
	return j
}

func letters(s string, j int) int {
	for j < len(s) {
		_, w, c := at(s, j)
		if c != clLetter {
			break
		}
		j += w
	}
	return j
}

func punct(s string, j int) int {
	for j < len(s) {
		_, w, c := at(s, j)
		if c != clOther {
			break
		}
		j += w
	}
	for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
		j++
	}
	return j
}

// contraction matches s|t|re|ve|m|ll|d case-insensitively (Unicode simple
// case folding: 's' also matches U+017F LATIN SMALL LETTER LONG S).
func contraction(s string) int {
	if s == "" {
		return 0
	}
	lower := func(i int) byte {
		if i < len(s) && s[i] >= 'A' && s[i] <= 'Z' {
			return s[i] + 'a' - 'A'
		}
		if i < len(s) {
			return s[i]
		}
		return 0
	}
	switch lower(0) {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if lower(1) == 'e' {
			return 2
		}
	case 'l':
		if lower(1) == 'l' {
			return 2
		}
	case 0xC5:
		if len(s) > 1 && s[1] == 0xBF { // ſ
			return 2
		}
	}
	return 0
}
