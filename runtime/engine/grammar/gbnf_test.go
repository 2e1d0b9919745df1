package grammar

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A JSON grammar written as llama.cpp's grammars/json.gbnf is, on the texts
// of TestJSONValue that do not depend on strata's own whitespace policy.
const jsonGBNF = `# JSON, as llama.cpp writes it
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws

ws ::= | " " | "\n" [ \t]{0,20}
`

func TestGBNF(t *testing.T) {
	g, err := FromGBNF(jsonGBNF)
	if err != nil {
		t.Fatal(err)
	}
	checkTexts(t, g,
		[]string{`{}`, `{"a": [1, 2.5, true, null, "x\u00e9\n"], "b": {}}`, "{\n  \"a\": 1\n}", `{"日本": "🙂"} `},
		[]string{`{`, `{"a"`, `{"a": [1,`, "{\"\xe6\x97"},
		[]string{`[]`, `{,}`, `{"a" 1}`, "{\"\x01\"", "{\"\xff\"", "{\"\xed\xa0\x80\"", `{"a": 01}`, `{"\x"}`})

	cases := []struct {
		src              string
		good, pre, wrong []string
	}{
		{`root ::= [а-я]+ "!"`, []string{"да!", "привет!"}, []string{"д"}, []string{"d!", "!", "я1"}},
		{`root ::= . . "|"`, []string{"ab|", "é🙂|", "|||"}, []string{"a", "a|"}, []string{"ab|c", "abc"}},
		{`root ::= [^a-z\n]{2,3}`, []string{"AB", "ÉÉÉ", "12"}, []string{"1"}, []string{"a1", "1\n", "1234"}},
		{"root ::= x{3} (\"-\" x)?\nx ::= \"ab\" | \"c\"", []string{"abcab", "ccc-ab", "ccc-c"}, []string{"cc", "ccc-"}, []string{"cccc", "ccc-cc"}},
		{"root ::= \"\\x41\\u00e9\\U0001F642\\t\\\"\"", []string{"Aé🙂\t\""}, nil, []string{"A\\"}},
		{"root ::= a | b\n\na ::= \"1\" # one\nb ::= (\n  \"2\"\n  | \"3\"\n)\n", []string{"1", "2", "3"}, nil, []string{"4"}},
	}
	for _, c := range cases {
		g, err := FromGBNF(c.src)
		if err != nil {
			t.Errorf("%q: %v", c.src, err)
			continue
		}
		checkTexts(t, g, c.good, c.pre, c.wrong)
	}
}

func TestGBNFErrors(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{`a ::= "x"`, "no rule named root"},
		{`root ::= x`, `rule "x" is used but not defined`},
		{`root ::= "x`, "line 1, column 10: the literal is not closed"},
		{"root ::= \"a\"\nroot ::= \"b\"", "line 2, column 1: rule \"root\" is defined twice"},
		{`root ::= ("a"`, "( is not closed"},
		{`root ::= [z-a]`, "runs backwards"},
		{`root ::= "a"{2,1}`, "bad repetition"},
		{`root ::= "a" )`, "unexpected"},
		{`root = "a"`, "expected ::="},
		{`root ::= "\q"`, `unknown escape \q`},
		{"root ::= root", "matches nothing"},
	} {
		_, err := FromGBNF(c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error with %q", c.src, err, c.want)
		}
	}
}

// Every code point of a range matches its class, and its neighbours
// outside do not: the UTF-8 range splitting at every length and
// continuation boundary.
func TestGBNFCodepointRanges(t *testing.T) {
	for _, r := range [][2]rune{{0, 0x7F}, {0x41, 0x5A}, {0x7E, 0x81}, {0x7FF, 0x801}, {0x800, 0xFFFF},
		{0xD7F0, 0xE010}, {0xFFF0, 0x10010}, {0x3FFF0, 0x40010}, {0x10FFF0, 0x10FFFF}, {0x5D0, 0x5EA}} {
		src := "root ::= [\\U" + hex8(r[0]) + "-\\U" + hex8(r[1]) + "]"
		g, err := FromGBNF(src)
		if err != nil {
			t.Fatal(err)
		}
		for c := r[0] - 2; c <= r[1]+2; c++ {
			if c < 0 || c > utf8.MaxRune || c >= 0xD800 && c <= 0xDFFF {
				continue
			}
			_, complete := run(g, string(c))
			if want := c >= r[0] && c <= r[1]; complete != want {
				t.Errorf("%s: U+%04X matches %v, want %v", src, c, complete, want)
			}
		}
	}
}

func hex8(r rune) string {
	const digits = "0123456789ABCDEF"
	b := make([]byte, 8)
	for i := 7; i >= 0; i-- {
		b[i] = digits[r&15]
		r >>= 4
	}
	return string(b)
}
