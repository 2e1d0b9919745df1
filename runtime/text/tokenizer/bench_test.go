package tokenizer

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/sharedrefs"
)

// TestHeapMergeMatchesReferences runs every reference case through the heap
// merge (normally only words over smallWord bytes take it).
func TestHeapMergeMatchesReferences(t *testing.T) {
	toks := testTokenizers(t)
	old := smallWord
	smallWord = 0
	defer func() { smallWord = old }()
	for _, c := range readCases(t) {
		tok := toks[c.Tokenizer]
		tok.mu.Lock()
		tok.cache = map[string][]int32{}
		tok.mu.Unlock()
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Fatalf("heap merge of %q:\n got %v\nwant %v", c.Text, got, c.IDs)
		}
	}
	for _, tok := range toks {
		tok.mu.Lock()
		tok.cache = map[string][]int32{}
		tok.mu.Unlock()
	}
}

// worstCases are inputs that are slow for naive tokenizers, n bytes each:
// one long word, a run of spaces (and of mixed white space), one punctuation
// piece, a line of digits, a CJK word.
func worstCases(n int) map[string]string {
	return map[string]string{
		"letters":    strings.Repeat("a", n),
		"spaces":     strings.Repeat(" ", n),
		"whitespace": strings.Repeat(" \t\u3000", n/5) + "x",
		"punct":      strings.Repeat("{}", n/2),
		"digits":     strings.Repeat("7", n),
		"cjk":        strings.Repeat("中文字", n/9),
	}
}

// TestLongInputsRoundTrip: a 1 MB single-line word and 256 KB of each other
// worst case encode (in about a second; a quadratic path would take minutes)
// and decode back to themselves.
func TestLongInputsRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("long inputs")
	}
	tok := testTokenizers(t)["qwen3"]
	size, word := 256<<10, 1<<20
	if raceEnabled {
		size, word = 32<<10, 64<<10
	}
	cases := worstCases(size)
	cases["letters"] = strings.Repeat("a", word)
	for name, s := range cases {
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != s {
			t.Errorf("%s: round trip changed the text (%d bytes in, %d out)", name, len(s), len(got))
		}
		if len(ids) == 0 || len(ids) > len(s) {
			t.Errorf("%s: %d tokens for %d bytes", name, len(ids), len(s))
		}
	}
}

// goSource concatenates Go standard library files up to about 1 MB.
func goSource(b *testing.B) string {
	var sb strings.Builder
	// TOKENIZER_BENCH_SRC names another folder of .go files (for a test
	// binary run where there is no Go toolchain).
	dir := os.Getenv("TOKENIZER_BENCH_SRC")
	if dir == "" {
		goroot, err := exec.Command("go", "env", "GOROOT").Output()
		if err != nil {
			b.Skip("no go command to find GOROOT:", err)
		}
		dir = filepath.Join(strings.TrimSpace(string(goroot)), "src", "net", "http")
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		b.Skip(err)
	}
	for _, e := range entries {
		if sb.Len() >= 1<<20 {
			break
		}
		if !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			b.Fatal(err)
		}
		sb.Write(data)
	}
	return sb.String()
}

// BenchmarkEncode measures MB/s on ~1 MB of Go source, cold (fresh word cache
// each iteration) and warm, and on the worst cases.
func BenchmarkEncode(b *testing.B) {
	tok := testTokenizers(b)["qwen3"]
	src := goSource(b)
	run := func(name, s string, cold bool) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				if cold {
					tok.mu.Lock()
					tok.cache = map[string][]int32{}
					tok.mu.Unlock()
				}
				tok.Encode(s)
			}
		})
	}
	run("go-source-cold", src, true)
	run("go-source-warm", src, false)
	for _, name := range []string{"letters", "spaces", "whitespace", "punct", "digits", "cjk"} {
		run("worst-"+name, worstCases(1 << 20)[name], true)
	}
}

// BenchmarkLoad reads Qwen3's gzipped tokenizer.json (151,643 tokens, 151,387 merges).
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load(sharedrefs.Qwen3Tokenizer()); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHeapMergeEqualsScan: on long words (where only the heap runs in
// Encode) the heap merge gives what the plain lowest-rank-leftmost scan,
// checked against HF on every reference, gives.
func TestHeapMergeEqualsScan(t *testing.T) {
	tok := testTokenizers(t)["qwen3"]
	rng := rand.New(rand.NewPCG(3, 4))
	pieces := []string{"a", "b", "e", "in", "er", "the", "ing", "ation", " "}
	for range 200 {
		var sb strings.Builder
		for sb.Len() < 400 {
			sb.WriteString(pieces[rng.IntN(len(pieces))])
		}
		word := sb.String()
		syms := make([]int32, len(word))
		for i := range word {
			syms[i] = tok.byteTok[word[i]]
		}
		want := tok.bpeScan(slices.Clone(syms))
		if got := tok.bpeHeap(slices.Clone(syms)); !slices.Equal(got, want) {
			t.Fatalf("word %q: heap %v, scan %v", word, got, want)
		}
	}
}
