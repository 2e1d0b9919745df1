package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStreamNeverSplitsCharacters: pushing the tokens of every reference text
// one by one gives only whole characters, and the pieces add up to Decode.
func TestStreamNeverSplitsCharacters(t *testing.T) {
	toks := testTokenizers(t)
	for _, c := range readCases(t) {
		tok := toks[c.Tokenizer]
		s := tok.NewStream()
		var b strings.Builder
		for _, id := range c.IDs {
			piece := s.Push(id)
			if !utf8.ValidString(piece) {
				t.Fatalf("%q: Push gave invalid UTF-8 %q", c.Text, piece)
			}
			b.WriteString(piece)
		}
		b.WriteString(s.Flush())
		if b.String() != c.Decoded {
			t.Fatalf("stream of %q = %q, want %q", c.Text, b.String(), c.Decoded)
		}
	}
}

// TestLossyDecode: ill-formed bytes become one U+FFFD per maximal subpart, as in
// the Unicode standard's table 3-8 example (and Rust's from_utf8_lossy).
func TestLossyDecode(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64", "a\uFFFD\uFFFD\uFFFDb\uFFFDc\uFFFD\uFFFDd"},
		{"\xE2\x82", "\uFFFD"},
		{"\xED\xA0\x80", "\uFFFD\uFFFD\uFFFD"}, // a surrogate is never a prefix
		{"\xF4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"},
		{"h\xC3\xA9", "hé"},
	} {
		if got := string(appendLossy(nil, []byte(c.in))); got != c.want {
			t.Errorf("lossy(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	// A stream holds an unfinished character back and flushes it as U+FFFD.
	tok := testTokenizers(t)["qwen3"]
	e2, _ := tok.TokenID(string(byteToRune[0xE2]))
	x82, _ := tok.TokenID(string(byteToRune[0x82]))
	xAC, _ := tok.TokenID(string(byteToRune[0xAC]))
	s := tok.NewStream()
	if got := s.Push(e2) + s.Push(x82); got != "" {
		t.Fatalf("half a character was emitted: %q", got)
	}
	if got := s.Push(xAC); got != "€" {
		t.Fatalf("got %q, want €", got)
	}
	s.Push(e2)
	if got := s.Flush(); got != "\uFFFD" {
		t.Fatalf("flush = %q, want U+FFFD", got)
	}
}
