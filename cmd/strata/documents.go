package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/strata-llm/strata/runtime/text/tokenizer"
)

// readDocuments tokenizes the -f files in order (invalid UTF-8 as U+FFFD),
// with eos after each one when there are several, so that a window running
// from one document into the next sees the boundary.
func readDocuments(tok *tokenizer.Tokenizer, files []string, eos int) ([]int, error) {
	var tokens []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("-f: %w", err)
		}
		tokens = append(tokens, tok.Encode(strings.ToValidUTF8(string(b), "\uFFFD"))...)
		if len(files) > 1 {
			tokens = append(tokens, eos)
		}
	}
	return tokens, nil
}
