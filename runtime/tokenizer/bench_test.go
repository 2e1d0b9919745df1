package tokenizer

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
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

// worstCases are inputs that are slow for naive tokenizers: one 1 MB word, a
// 1 MB run of spaces (and of mixed white space), 1 MB of punctuation and a
// 1 MB line of digits.
func worstCases() map[string]string {
	const n = 1 << 20
	return map[string]string{
		"letters":    strings.Repeat("a", n),
		"spaces":     strings.Repeat(" ", n),
		"whitespace": strings.Repeat(" \t\u3000", n/5) + "x",
		"punct":      strings.Repeat("{}", n/2),
		"digits":     strings.Repeat("7", n),
		"cjk":        strings.Repeat("中文字", n/9),
	}
}

// TestLongInputsRoundTrip: each 1 MB worst case encodes (in well under a
// second; a quadratic path would take minutes) and decodes back to itself.
func TestLongInputsRoundTrip(t *testing.T) {
	if testing.Short() {
		t.Skip("1 MB inputs")
	}
	tok := testTokenizers(t)["qwen3"]
	for name, s := range worstCases() {
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
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		b.Skip("no go command to find GOROOT:", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(goroot)), "src", "net", "http")
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
		run("worst-"+name, worstCases()[name], true)
	}
}
