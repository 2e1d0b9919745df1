package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/text"
)

// readDocuments tokenizes the -f files in order (invalid UTF-8 as U+FFFD),
// with an end-of-text token after each one when there are several, so that a
// window running from one document into the next sees the boundary. The
// token is the model's first EOS id, else the tokenizer's; a model with
// neither (a synth file's placeholder vocabulary) takes one file only.
func readDocuments(tm *text.Model, c *models.Config, files []string) ([]int, error) {
	eos := -1
	switch {
	case len(c.Architecture.EOSTokenIDs) > 0:
		eos = c.Architecture.EOSTokenIDs[0]
	case len(tm.EOS) > 0:
		eos = tm.EOS[0]
	}
	if eos < 0 && len(files) > 1 {
		return nil, fmt.Errorf("-f: %d files given, but neither model %s nor its tokenizer names an end-of-text token to separate them: give one file", len(files), c.Name)
	}
	tok := tm.Tok
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
