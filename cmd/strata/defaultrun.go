package main

import (
	"fmt"
	"io"

	"github.com/strata-llm/strata"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/tokenizer"
)

// textStream prints the default model's prompt as text, then each token's
// text as it is committed: `strata run` with no model and no prompt streams
// tiny-go's continuation of a Go snippet. It sets opt.OnToken and opt.EOS
// and returns what ends the output.
func textStream(stdout io.Writer, prompt []int, eos []int, opt *engine.GenerateOptions) (finish func(), err error) {
	b, err := strata.DefaultModelFile("tokenizer.json")
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Parse(b)
	if err != nil {
		return nil, fmt.Errorf("the default model's tokenizer: %w", err)
	}
	st := tok.NewStream()
	for _, id := range prompt {
		fmt.Fprint(stdout, st.Push(id))
	}
	opt.EOS = eos
	opt.OnToken = func(id int) error {
		_, err := fmt.Fprint(stdout, st.Push(id))
		return err
	}
	return func() { fmt.Fprintln(stdout, st.Flush()) }, nil
}
