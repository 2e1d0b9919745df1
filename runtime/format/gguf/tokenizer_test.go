package gguf

import (
	"path/filepath"
	"strings"
	"testing"
)

// A placeholder vocabulary reads back as llama.cpp's SPM loader wants it:
// as many tokens, scores and types as asked, <unk> <s> </s> first, the
// 256 byte tokens after them, distinct names throughout.
func TestPlaceholderVocab(t *testing.T) {
	const n = 300
	kv, err := PlaceholderVocab(n)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "v.gguf")
	if err := WriteFile(path, kv, nil); err != nil {
		t.Fatal(err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if m, err := f.String(KeyTokenizerModel); err != nil || m != "llama" {
		t.Fatalf("%s = %q, %v; want llama", KeyTokenizerModel, m, err)
	}
	tokens, err := f.Array(KeyTokens)
	if err != nil {
		t.Fatal(err)
	}
	names := tokens.Values.([]string)
	seen := map[string]bool{}
	for _, s := range names {
		if seen[s] {
			t.Fatalf("token %q twice", s)
		}
		seen[s] = true
	}
	if len(names) != n || names[0] != "<unk>" || names[1] != "<s>" || names[2] != "</s>" || names[3] != "<0x00>" || names[258] != "<0xFF>" {
		t.Fatalf("%d tokens starting %q", len(names), names[:4])
	}
	for _, key := range []string{KeyScores, KeyTokenType} {
		a, err := f.Array(key)
		if err != nil || a.Len() != n {
			t.Fatalf("%s: %d values, %v; want %d", key, a.Len(), err, n)
		}
	}
	types, _ := f.Array(KeyTokenType)
	if ty := types.Values.([]int32); ty[0] != int32(TokenUnknown) || ty[1] != int32(TokenControl) || ty[3] != int32(TokenByte) || ty[n-1] != int32(TokenNormal) {
		t.Fatalf("token types %v … %v", ty[:4], ty[n-1])
	}
	if _, err := PlaceholderVocab(258); err == nil || !strings.Contains(err.Error(), "at least 259") {
		t.Fatalf("a 258-token vocabulary: %v; want a refusal", err)
	}
}
