package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
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

// TestConcurrentEncode: one tokenizer (and its word cache) used from several
// goroutines gives every goroutine HF's ids (run with -race).
func TestConcurrentEncode(t *testing.T) {
	toks := testTokenizers(t)
	cases := readCases(t)
	errs := make(chan string, 4)
	for g := range 4 {
		go func() {
			for i := g; i < len(cases); i += 2 {
				c := cases[i]
				if got := toks[c.Tokenizer].Encode(c.Text); !equalInts(got, c.IDs) {
					errs <- c.Text
					return
				}
			}
			errs <- ""
		}()
	}
	for range 4 {
		if s := <-errs; s != "" {
			t.Errorf("concurrent Encode(%q) differs from HF", s)
		}
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FuzzRoundTrip: any valid UTF-8 text decodes back to its NFC form, and the
// stream gives the same text in whole characters.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{"func main() {\n\tfmt.Println(\"héllo\")\n}", "  \t\r\n\u3000x", "<|im_end|><think>", "e\u0301 ﬁ 😀👍🏽"} {
		f.Add(s)
	}
	toks := testTokenizers(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		for name, tok := range toks {
			ids := tok.Encode(s)
			want := norm.NFC.String(s)
			// Added tokens are matched before normalization, so NFC applies
			// to the text between them; the references pin that down.
			if got := tok.Decode(ids); got != want && !strings.Contains(s, "<") {
				t.Fatalf("%s: Decode(Encode(%q)) = %q, want %q", name, s, got, want)
			}
			st := tok.NewStream()
			var b strings.Builder
			for _, id := range ids {
				p := st.Push(id)
				if !utf8.ValidString(p) {
					t.Fatalf("%s: stream gave half a character: %q", name, p)
				}
				b.WriteString(p)
			}
			b.WriteString(st.Flush())
			if b.String() != tok.Decode(ids) {
				t.Fatalf("%s: stream %q != Decode %q", name, b.String(), tok.Decode(ids))
			}
		}
	})
}
