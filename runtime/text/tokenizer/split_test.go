package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/dlclark/regexp2"
)

// regexSplit is the reference split: the pattern run by a backtracking engine
// with lookahead (regexp2, .NET semantics: \s is [\f\n\r\t\v\x85\p{Z}], the same
// set as Unicode White_Space that Oniguruma uses in HF tokenizers).
func regexSplit(t *testing.T, re *regexp2.Regexp, s string) []string {
	t.Helper()
	var out []string
	m, err := re.FindStringMatch(s)
	for ; m != nil && err == nil; m, err = re.FindNextMatch(m) {
		out = append(out, m.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func scanSplit(s string) []string {
	var out []string
	start := 0
	for _, end := range splitQwen(s, nil) {
		out = append(out, s[start:end])
		start = end
	}
	return out
}

func qwenRegexp2(t *testing.T) *regexp2.Regexp {
	re, err := regexp2.Compile(qwenPattern, regexp2.Unicode)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

// TestSplitMatchesRegexp2: the hand-written scanner cuts every reference text
// and many random strings exactly where the regex does.
func TestSplitMatchesRegexp2(t *testing.T) {
	re := qwenRegexp2(t)
	check := func(s string) {
		t.Helper()
		if got, want := scanSplit(s), regexSplit(t, re, s); !slices.Equal(got, want) {
			t.Fatalf("split(%q):\n got %q\nwant %q", s, got, want)
		}
	}
	for _, c := range readCases(t) {
		check(c.Text)
	}
	alphabet := []string{"a", "Z", "é", "中", "한", "ب", "0", "٣", "²", "'", "s", "S", "t", "re", "VE", "m", "ll", "D",
		" ", " ", " ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u3000", "\u2028", "\u0085", "\u200b",
		".", ",", "(", "{", "}", "_", "-", "\u0301", "😀", "\u200d", "\x00", "\x1f", "\u00ad"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 3000 {
		var b strings.Builder
		for range 1 + rng.IntN(24) {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		check(b.String())
	}
}
