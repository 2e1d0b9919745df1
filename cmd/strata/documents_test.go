package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
)

// A model and tokenizer without an end-of-text token (a synth file's
// placeholder vocabulary) read one document, and refuse several with an
// error naming -f instead of indexing an empty list.
func TestReadDocumentsSeparator(t *testing.T) {
	tm, err := defaultText()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.txt"), filepath.Join(dir, "b.txt")
	for _, p := range []string{a, b} {
		if err := os.WriteFile(p, []byte("func main() {}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	one := tm.Tok.Encode("func main() {}\n")
	c := &models.Config{Name: "m", Architecture: models.Architecture{EOSTokenIDs: []int{7}}}
	got, err := readDocuments(tm, c, []string{a, b})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2*len(one)+2 || got[len(one)] != 7 || got[len(got)-1] != 7 {
		t.Fatalf("two documents with the model's EOS 7: got %v (one is %v)", got, one)
	}
	c.Architecture.EOSTokenIDs = nil
	if got, err = readDocuments(tm, c, []string{a, b}); err != nil || got[len(one)] != tm.EOS[0] {
		t.Fatalf("the tokenizer's EOS %v separates when the model has none: got %v, %v", tm.EOS, got, err)
	}
	tm.EOS = nil
	if got, err = readDocuments(tm, c, []string{a}); err != nil || len(got) != len(one) {
		t.Fatalf("one document without any EOS: got %v, %v", got, err)
	}
	if _, err = readDocuments(tm, c, []string{a, b}); err == nil || !strings.Contains(err.Error(), "-f") {
		t.Fatalf("two documents without any EOS: want an error naming -f, got %v", err)
	}
}
