package tokenizer

import (
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/strata-llm/strata/runtime/format/gguf"
)

// TestGGUFRoundTrip: both reference tokenizers written as GGUF metadata (padded
// to more rows, as a model's embedding is) and read back encode and decode
// every reference case as HF does.
func TestGGUFRoundTrip(t *testing.T) {
	toks := testTokenizers(t)
	back := map[string]*Tokenizer{}
	for name, tok := range toks {
		rows := tok.Vocab() + 7
		v, err := tok.GGUFVocab(rows)
		if err != nil {
			t.Fatal(err)
		}
		v.EOS, v.EOSIDs = 2, []int{0, 2}
		path := filepath.Join(t.TempDir(), name+".gguf")
		if err := gguf.WriteFile(path, append([]gguf.KV{{Key: "general.architecture", Value: "test"}}, v.Metadata()...), nil); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		got, err := gguf.VocabOf(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Tokens) != rows || got.EOS != 2 || !slices.Equal(got.EOSIDs, []int{0, 2}) || got.BOS != -1 {
			t.Fatalf("%s: read back %d tokens, eos %d %v, bos %d", name, len(got.Tokens), got.EOS, got.EOSIDs, got.BOS)
		}
		if got.Tokens[rows-1] != "[PAD"+itoa(rows-1)+"]" || got.Types[rows-1] != int32(gguf.TokenUnused) {
			t.Fatalf("%s: last row %q type %d", name, got.Tokens[rows-1], got.Types[rows-1])
		}
		if back[name], err = FromGGUF(got); err != nil {
			t.Fatal(err)
		}
		if back[name].Vocab() != rows {
			t.Fatalf("%s: %d ids from GGUF, want %d", name, back[name].Vocab(), rows)
		}
	}
	// convert_hf_to_gguf's types: <|im_start|> control, <think> user-defined.
	q := back["qwen3"]
	for s, want := range map[string]bool{"<|im_start|>": true, "<|endoftext|>": true, "<think>": false, "<|fim_prefix|>": true} {
		id, ok := q.TokenID(s)
		if !ok || q.IsSpecial(id) != want {
			t.Errorf("%s: id %d found %v special %v, want special %v", s, id, ok, q.IsSpecial(id), want)
		}
	}
	for _, c := range readCases(t) {
		tok := back[c.Tokenizer]
		if got := tok.Encode(c.Text); !slices.Equal(got, c.IDs) {
			t.Fatalf("%s from GGUF: Encode(%q) = %v, want %v", c.Tokenizer, c.Text, got, c.IDs)
		}
		if got := tok.Decode(c.IDs); got != c.Decoded {
			t.Fatalf("%s from GGUF: Decode = %q, want %q", c.Tokenizer, got, c.Decoded)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
