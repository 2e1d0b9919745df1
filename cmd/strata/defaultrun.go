package main

import (
	"fmt"
	"io"

	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/text/tokenizer"
)

// textStream prints the default model's prompt as text and returns the
// OnToken stage that prints each committed token's text, and what ends the
// output: `strata run` with no model and no prompt streams tiny-go's
// continuation of a Go snippet.
func textStream(stdout io.Writer, prompt []int) (token func(id int) error, finish func(), err error) {
	b, err := load.DefaultModelFile("tokenizer.json")
	if err != nil {
		return nil, nil, fmt.Errorf("the default model: %w", err)
	}
	tok, err := tokenizer.Parse(b)
	if err != nil {
		return nil, nil, fmt.Errorf("the default model's tokenizer: %w", err)
	}
	st := tok.NewStream()
	for _, id := range prompt {
		fmt.Fprint(stdout, st.Push(id))
	}
	token = func(id int) error {
		_, err := fmt.Fprint(stdout, st.Push(id))
		return err
	}
	return token, func() { fmt.Fprintln(stdout, st.Flush()) }, nil
}
