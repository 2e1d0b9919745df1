package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Special-token text from an untrusted source (a chat message) must not
// become control tokens: written as plain text it is tokenized as plain text
// (HF split_special_tokens=True, llama.cpp parse_special=false). A chat
// template, though, renders such content and its own control tokens into
// one string. EscapeSpecial marks the content's special-token text before
// rendering; EncodeEscaped then matches the template's control tokens and
// reads each mark as the text it stands for, tokenized with its
// neighbours as ordinary text.
//
// A mark is one rune of the Supplementary Private Use Area-A: markBase+1+k
// stands for added token k. markBase itself escapes the rune after it, so a
// mark-range rune already in the content stays that rune.
const markBase = 0xF0000

// markLead is the first UTF-8 byte of every rune from U+C0000 to U+FFFFF,
// marks included.
const markLead = 0xF3

// isMark reports whether r is in the rune range marks use.
func (t *Tokenizer) isMark(r rune) bool { return r >= markBase && r <= markBase+rune(len(t.added)) }

// EscapeSpecial returns s with the text of every special added token
// replaced by its mark (leftmost-longest, as matching finds them), for
// EncodeEscaped to read as plain text. Text without special tokens and
// mark-range runes comes back unchanged.
func (t *Tokenizer) EscapeSpecial(s string) string {
	var b strings.Builder
	start := 0
	for i := 0; i < len(s); {
		if s[i] == markLead {
			if r, size := utf8.DecodeRuneInString(s[i:]); t.isMark(r) {
				b.WriteString(s[start:i])
				b.WriteRune(markBase)
				i += size
				b.WriteString(s[i-size : i])
				start = i
				continue
			}
		}
		k := t.specialAt(s, i)
		if k < 0 {
			i++
			continue
		}
		b.WriteString(s[start:i])
		b.WriteRune(markBase + 1 + rune(k))
		i += len(t.added[k].content)
		start = i
	}
	if start == 0 {
		return s
	}
	b.WriteString(s[start:])
	return b.String()
}

// specialAt is the index in t.added of the longest special added token at
// s[i:], or -1.
func (t *Tokenizer) specialAt(s string, i int) int {
	for n := range t.addedByFirst {
		for _, k := range t.addedByFirst[n][s[i]] {
			if t.added[k].special && strings.HasPrefix(s[i:], t.added[k].content) {
				return k // longest first
			}
		}
	}
	return -1
}

// UnescapeSpecial turns the marks EscapeSpecial made back into the text
// they stand for: the string as the model reads it.
func (t *Tokenizer) UnescapeSpecial(s string) string {
	if strings.IndexByte(s, markLead) < 0 {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == markBase && i+size < len(s):
			_, next := utf8.DecodeRuneInString(s[i+size:])
			b.WriteString(s[i+size : i+size+next])
			i += size + next
			continue
		case t.isMark(r) && r != markBase:
			b.WriteString(t.added[r-markBase-1].content)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// EncodeText tokenizes text with the special tokens written in it taken as
// plain text (HF encode(text, add_special_tokens=False,
// split_special_tokens=True)); added tokens that are not special still
// match.
func (t *Tokenizer) EncodeText(text string) []int { return t.EncodeEscaped(t.EscapeSpecial(text)) }

// EncodeEscaped tokenizes a string whose untrusted parts went through
// EscapeSpecial (a chat template's rendering of escaped messages): its own
// special-token text is matched as the tokens, and each mark is read as the
// text it stands for, tokenized as ordinary text with what surrounds it.
func (t *Tokenizer) EncodeEscaped(s string) []int {
	return t.encode(s, t.UnescapeSpecial)
}
