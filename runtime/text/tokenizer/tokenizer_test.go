package tokenizer

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/strata-llm/strata/internal/sharedrefs"
)

var refs = filepath.Join("..", "..", "..", "testdata", "tokenizer-refs")

var (
	loadOnce sync.Once
	loaded   map[string]*Tokenizer
	loadErr  error
)

// testTokenizers loads both reference tokenizers once per test binary.
func testTokenizers(t testing.TB) map[string]*Tokenizer {
	t.Helper()
	loadOnce.Do(func() {
		loaded = map[string]*Tokenizer{}
		for name, path := range map[string]string{
			"qwen3":   sharedrefs.Qwen3Tokenizer(),
			"tiny-go": filepath.Join("..", "..", "..", "models", "tiny-go", "tokenizer.json"),
		} {
			tok, err := Load(path)
			if err != nil {
				loadErr = err
				return
			}
			loaded[name] = tok
		}
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

type tokCase struct {
	Tokenizer string `json:"tokenizer"`
	Text      string `json:"text"`
	IDs       []int  `json:"ids"`
	Decoded   string `json:"decoded"`
}

func readCases(t testing.TB) []tokCase {
	t.Helper()
	f, err := os.Open(filepath.Join(refs, "tokenizer_cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cases []tokCase
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var c tokCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cases
}

// TestReferenceCases: every HF reference case encodes to HF's ids and decodes to
// HF's text, for both tokenizers.
func TestReferenceCases(t *testing.T) {
	toks := testTokenizers(t)
	cases := readCases(t)
	if len(cases) != 622 {
		t.Fatalf("%d cases, want 622", len(cases))
	}
	bad := 0
	for i, c := range cases {
		tok := toks[c.Tokenizer]
		if tok == nil {
			t.Fatalf("case %d: unknown tokenizer %q", i, c.Tokenizer)
		}
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			bad++
			t.Errorf("case %d %s Encode(%q):\n got %v\nwant %v", i, c.Tokenizer, c.Text, got, c.IDs)
		}
		if got := tok.Decode(c.IDs); got != c.Decoded {
			bad++
			t.Errorf("case %d %s Decode: got %q want %q", i, c.Tokenizer, got, c.Decoded)
		}
		if bad > 20 {
			t.Fatal("too many failures")
		}
	}
}
