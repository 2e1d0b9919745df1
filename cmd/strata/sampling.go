package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// samplingFlags are strata run's sampling-chain flags (llama.cpp's names
// and defaults; only the temperature defaults to 0, greedy, so runs are
// reproducible unless asked otherwise).
type samplingFlags struct {
	temperature, topP, minP, repeat, presence, frequency *float64
	topK, lastN                                          *int
	seed                                                 *int64
	ignoreEOS                                            *bool
	stops                                                stringList
}

func addSamplingFlags(fs *flag.FlagSet) *samplingFlags {
	f := &samplingFlags{
		temperature: fs.Float64("temperature", 0, "sampling temperature (0: greedy, the argmax after the penalties; llama.cpp's default is 0.8)"),
		topK:        fs.Int("top-k", 40, "keep the `K` most likely tokens (0: off)"),
		topP:        fs.Float64("top-p", 0.95, "keep the most likely tokens whose probability adds up to `P`, in (0, 1] (1: off)"),
		minP:        fs.Float64("min-p", 0.05, "keep tokens at least `P` times as likely as the most likely one, in [0, 1] (0: off)"),
		repeat:      fs.Float64("repeat-penalty", 1, "divide positive (multiply negative) logits of tokens in the last --repeat-last-n by `R` > 0 (1: off)"),
		lastN:       fs.Int("repeat-last-n", 64, "how many of the latest tokens (prompt included) the penalties see (0: none, -1: all)"),
		presence:    fs.Float64("presence-penalty", 0, "subtract `X` from the logit of every token in that window, in [-2, 2] (0: off)"),
		frequency:   fs.Float64("frequency-penalty", 0, "subtract `X` per occurrence in that window, in [-2, 2] (0: off)"),
		seed:        fs.Int64("seed", 1, "sampling seed (with --temperature > 0)"),
		ignoreEOS:   fs.Bool("ignore-eos", false, "keep generating after an EOS token (generation_config.json's or the GGUF's eos_token_id)"),
	}
	fs.Var(&f.stops, "stop", "stop when the generated text contains this `string` (repeatable; it needs the model's tokenizer)")
	return f
}

// params checks the flags and returns the chain's parameters; errors name
// the flag.
func (f *samplingFlags) params() (sample.Params, error) {
	p := sample.Params{Temperature: *f.temperature, TopK: *f.topK, TopP: *f.topP, MinP: *f.minP,
		RepeatPenalty: *f.repeat, PresencePenalty: *f.presence, FrequencyPenalty: *f.frequency,
		PenaltyLastN: *f.lastN, Seed: *f.seed}
	// The library reads 0 as "unset" for these two; on the command line 0
	// is a mistake (top-p 0 keeps nothing, a penalty of 0 zeroes logits).
	if p.TopP == 0 {
		return p, usagef("--top-p is 0: expected a probability in (0, 1] (1: off)")
	}
	if p.RepeatPenalty == 0 {
		return p, usagef("--repeat-penalty is 0: expected a number > 0 (1: off)")
	}
	if err := p.Validate(); err != nil {
		return p, usagef("--%v", err)
	}
	for _, s := range f.stops {
		if s == "" {
			return p, usagef("--stop is empty: expected the text to stop at")
		}
	}
	return p, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ", ") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// maxThreads bounds --threads: more goroutines per kernel than this only
// costs scheduling.
const maxThreads = 1024

// checkThreads validates --threads.
func checkThreads(n int) error {
	if n < 0 || n > maxThreads {
		return usagef("--threads is %d: expected 0 (the model's runtime.threads, else one per core) to %d", n, maxThreads)
	}
	return nil
}

// eosIDs are the ids that end generation for the model: an HF directory's
// generation_config.json eos_token_id (an id or a list) when it has one,
// else config.json's; a GGUF's tokenizer.ggml.eos_token_id when present,
// with the embedded config's. The default model has none.
func eosIDs(hf, ggufPath string, c *models.Config) ([]int, error) {
	ids := append([]int(nil), c.Architecture.EOSTokenIDs...)
	switch {
	case hf != "":
		path := filepath.Join(hf, "generation_config.json")
		data, err := os.ReadFile(path)
		if errors.Is(err, os.ErrNotExist) {
			return ids, nil
		}
		if err != nil {
			return nil, err
		}
		var g struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if err := json.Unmarshal(data, &g); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(g.EOS) == 0 || string(g.EOS) == "null" {
			return ids, nil
		}
		var one int
		if json.Unmarshal(g.EOS, &one) == nil {
			return []int{one}, nil
		}
		var list []int
		if err := json.Unmarshal(g.EOS, &list); err != nil {
			return nil, fmt.Errorf("%s: eos_token_id is %s, expected a token id or a list of them", path, g.EOS)
		}
		return list, nil
	case ggufPath != "":
		f, err := gguf.Open(ggufPath)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		const key = "tokenizer.ggml.eos_token_id"
		if _, ok := f.Value(key); !ok {
			return ids, nil
		}
		id, err := f.Uint(key)
		if err != nil {
			return nil, err
		}
		if id >= uint64(c.Architecture.VocabSize) {
			return nil, fmt.Errorf("%s: %s is %d, outside the vocabulary of %d ids", ggufPath, key, id, c.Architecture.VocabSize)
		}
		if slices.Contains(ids, int(id)) {
			return ids, nil
		}
		return append(ids, int(id)), nil
	}
	return ids, nil
}

// idPrinter streams token ids to w as they are generated, space-separated
// on one line.
type idPrinter struct {
	w io.Writer
	n int
}

func (p *idPrinter) token(id int) error {
	sep := " "
	if p.n == 0 {
		sep = ""
	}
	p.n++
	_, err := fmt.Fprintf(p.w, "%s%d", sep, id)
	return err
}

// end closes the line (also when the run failed midway).
func (p *idPrinter) end() { fmt.Fprintln(p.w) }

// stopOnText returns an OnToken stage that feeds each token's text to a
// Stopper and ends generation (engine.ErrStop) once a stop string appears;
// next runs first for every token. textOf gives a token's bytes: without a
// tokenizer (nil) stop strings cannot be matched and are refused.
func stopOnText(stops []string, textOf func(id int) []byte, next func(id int) error) (func(id int) error, error) {
	if len(stops) == 0 {
		return next, nil
	}
	if textOf == nil {
		return nil, usagef("--stop matches the generated text, and this model has no tokenizer loaded (the run prints token ids)")
	}
	st := sample.NewStopper(stops)
	return func(id int) error {
		if err := next(id); err != nil {
			return err
		}
		if _, stopped := st.Push(textOf(id)); stopped {
			return engine.ErrStop
		}
		return nil
	}, nil
}

// phaseClock times Generate's two phases: the prompt (prefill windows and
// the first token's sampling) up to the first token, then generation.
type phaseClock struct {
	start, first time.Time
	tokens       int
}

func (c *phaseClock) token() {
	if c.tokens == 0 {
		c.first = time.Now()
	}
	c.tokens++
}

// printTimings writes llama.cpp-style timings: the load, the prompt's
// tokens and tok/s, the generated tokens after the first (each one decode
// step) and their tok/s, separately.
func printTimings(w io.Writer, model string, loaded time.Duration, c *phaseClock, promptTokens int, end time.Time) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	line := func(what string, d time.Duration, n int) {
		if n == 0 {
			fmt.Fprintf(w, "strata: %16s = %10.2f ms / %5d tokens\n", what, ms(d), n)
			return
		}
		fmt.Fprintf(w, "strata: %16s = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
			what, ms(d), n, ms(d)/float64(n), float64(n)/math.Max(d.Seconds(), 1e-9))
	}
	fmt.Fprintf(w, "strata: %16s = %10.2f ms (%s)\n", "load time", ms(loaded), model)
	first := end
	if c.tokens > 0 {
		first = c.first
	}
	line("prompt eval time", first.Sub(c.start), promptTokens)
	line("eval time", end.Sub(first), max(c.tokens-1, 0))
	fmt.Fprintf(w, "strata: %16s = %10.2f ms / %5d tokens (%d generated)\n", "total time", ms(end.Sub(c.start)), promptTokens+max(c.tokens-1, 0), c.tokens)
}
