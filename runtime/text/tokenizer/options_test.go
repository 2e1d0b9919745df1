package tokenizer

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// tinyJSON is a minimal Qwen2-layout tokenizer.json with the given model
// fields and added tokens, for option tests.
func tinyJSON(t *testing.T, model map[string]any, added []map[string]any, edit func(map[string]any)) []byte {
	t.Helper()
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	f := map[string]any{
		"added_tokens": added,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": qwenPattern}, "behavior": "Isolated", "invert": false}, bl}},
		"decoder": bl,
		"model":   model,
	}
	if edit != nil {
		edit(f)
	}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestOptionsRefusedByName: what the tokenizer does not implement is refused
// at load, naming the option.
func TestOptionsRefusedByName(t *testing.T) {
	bpe := func(extra map[string]any) map[string]any {
		m := map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0}, "merges": []string{}}
		for k, v := range extra {
			m[k] = v
		}
		return m
	}
	for _, c := range []struct {
		data []byte
		want string
	}{
		{tinyJSON(t, bpe(map[string]any{"dropout": 0.1}), nil, nil), "model.dropout"},
		{tinyJSON(t, bpe(map[string]any{"continuing_subword_prefix": "##"}), nil, nil), "continuing_subword_prefix"},
		{tinyJSON(t, bpe(map[string]any{"fuse_unk": true}), nil, nil), "fuse_unk"},
		{tinyJSON(t, map[string]any{"type": "WordPiece", "vocab": map[string]int{"a": 0}}, nil, nil), `model.type "WordPiece"`},
		{tinyJSON(t, bpe(nil), []map[string]any{{"id": 1, "content": "<x>", "lstrip": true}}, nil), "lstrip"},
		{tinyJSON(t, bpe(nil), []map[string]any{{"id": 1, "content": "<x>", "single_word": true}}, nil), "single_word"},
		{tinyJSON(t, bpe(nil), nil, func(f map[string]any) { f["normalizer"] = map[string]any{"type": "NFKC"} }), `normalizer type "NFKC"`},
		{tinyJSON(t, bpe(nil), nil, func(f map[string]any) { f["decoder"] = map[string]any{"type": "WordPiece"} }), `decoder type "WordPiece"`},
		{tinyJSON(t, bpe(nil), nil, func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}
		}), `pre_tokenizer type "ByteLevel"`},
		{tinyJSON(t, bpe(nil), nil, func(f map[string]any) {
			f["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[0].(map[string]any)["pattern"] = map[string]any{"Regex": `\w+`}
		}), "Split pattern"},
		{tinyJSON(t, bpe(map[string]any{"merges": []string{"a b"}}), nil, nil), `merge 0 "a" "b"`},
	} {
		_, err := Parse(c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want one naming %q", err, c.want)
		}
	}
}

// TestIgnoreMergesAndByteFallback: ignore_merges takes a word that is itself a
// token whole (merges would give a + bc); byte_fallback spells a character
// missing from the vocabulary with <0xXX> tokens of its UTF-8 bytes.
func TestIgnoreMergesAndByteFallback(t *testing.T) {
	vocab := map[string]int{"a": 0, "b": 1, "c": 2, "bc": 3, "abc": 4, "<0xC4>": 5, "<0xA0>": 6, "<0x21>": 7}
	model := map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"b c"}}
	plain, err := Parse(tinyJSON(t, model, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := plain.Encode("abc"); !slices.Equal(got, []int{0, 3}) {
		t.Fatalf("merges: %v, want [0 3]", got)
	}
	model["ignore_merges"], model["byte_fallback"] = true, true
	tok, err := Parse(tinyJSON(t, model, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("abc"); !slices.Equal(got, []int{4}) {
		t.Fatalf("ignore_merges: %v, want [4]", got)
	}
	// " a": the space is the byte-level character Ġ (U+0120 = C4 A0), absent.
	if got := tok.Encode(" a"); !slices.Equal(got, []int{5, 6, 0}) {
		t.Fatalf("byte_fallback: %v, want [5 6 0]", got)
	}
}
