// Package sample turns a row of logits into the next token: the sampling
// chain (repetition, presence and frequency penalties over a window of the
// history, top-k, top-p, min-p, temperature) and the draw, greedy at
// temperature 0, plus the stop-string matcher a text stream is fed through.
//
// The chain runs in llama.cpp's default order (common/sampling.cpp: penalties,
// top-k, top-p, min-p, temperature, then the draw), so top-k/top-p/min-p see
// the penalised logits at temperature 1 and the temperature only reshapes
// what they kept. docs/sampling.md gives the semantics of each step.
package sample

import (
	"fmt"
	"math"
)

// Params configure the chain. The zero value is plain greedy decoding; every
// field's zero means "off", so a Params literal names only what it uses.
type Params struct {
	// Temperature divides the logits kept by the filters before the draw;
	// 0 is greedy: the argmax of the penalised logits (lowest id on ties).
	Temperature float64
	// TopK keeps the K largest logits (ties: lower ids first); 0: off.
	TopK int
	// TopP keeps the smallest prefix of the candidates, most likely first,
	// whose probability reaches TopP (the one that crosses it included);
	// in [0, 1], where 1 and 0 (unset) are off.
	TopP float64
	// MinP keeps the candidates whose probability is at least MinP times the
	// most likely one's; in [0, 1], 0: off.
	MinP float64
	// RepeatPenalty (llama.cpp, after CTRL) divides a positive logit and
	// multiplies a negative one, once per distinct token of the penalty
	// window; > 0, where 1 and 0 (unset) are off. Above 1 discourages
	// repeats, below 1 encourages them.
	RepeatPenalty float64
	// PresencePenalty (OpenAI) is subtracted from the logit of every token
	// that occurs in the window; FrequencyPenalty (OpenAI) is subtracted once
	// per occurrence. Each in [-2, 2]; negative values encourage repeats.
	PresencePenalty, FrequencyPenalty float64
	// PenaltyLastN is how many of the latest tokens (prompt and output) the
	// penalties see: -1 all of them, 0 none (the penalties are off).
	PenaltyLastN int
	// Seed seeds the draw (ignored when greedy).
	Seed int64
}

// Greedy reports whether the chain picks the argmax (temperature 0).
func (p Params) Greedy() bool { return p.Temperature == 0 }

// PlainGreedy says the chain is greedy without penalties: each token is the
// first index of its row's largest logit, whatever came before it.
func (p Params) PlainGreedy() bool { return p.Greedy() && !p.penalized() }

// repeat is the repetition penalty in effect (1: none).
func (p Params) repeat() float64 {
	if p.RepeatPenalty == 0 {
		return 1
	}
	return p.RepeatPenalty
}

// topP is the top-p threshold in effect (1: none).
func (p Params) topP() float64 {
	if p.TopP == 0 {
		return 1
	}
	return p.TopP
}

// penalized reports whether any penalty can change a logit.
func (p Params) penalized() bool {
	return p.PenaltyLastN != 0 && (p.repeat() != 1 || p.PresencePenalty != 0 || p.FrequencyPenalty != 0)
}

// Validate checks every field; the error names the field as the CLI flag
// does (temperature, top-k, top-p, ...) and says what was expected.
func (p Params) Validate() error {
	bad := func(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }
	switch {
	case bad(p.Temperature) || p.Temperature < 0:
		return fmt.Errorf("temperature is %v: expected a finite number ≥ 0 (0: greedy)", p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("top-k is %d: expected a count ≥ 0 (0: off)", p.TopK)
	case bad(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return fmt.Errorf("top-p is %v: expected a probability in (0, 1] (1: off)", p.TopP)
	case bad(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return fmt.Errorf("min-p is %v: expected a probability in [0, 1] (0: off)", p.MinP)
	case bad(p.RepeatPenalty) || p.RepeatPenalty < 0:
		return fmt.Errorf("repeat-penalty is %v: expected a finite number > 0 (1: off)", p.RepeatPenalty)
	case bad(p.PresencePenalty) || math.Abs(p.PresencePenalty) > 2:
		return fmt.Errorf("presence-penalty is %v: expected a number in [-2, 2] (0: off)", p.PresencePenalty)
	case bad(p.FrequencyPenalty) || math.Abs(p.FrequencyPenalty) > 2:
		return fmt.Errorf("frequency-penalty is %v: expected a number in [-2, 2] (0: off)", p.FrequencyPenalty)
	case p.PenaltyLastN < -1:
		return fmt.Errorf("repeat-last-n is %d: expected a count ≥ 0, or -1 for the whole history", p.PenaltyLastN)
	}
	return nil
}
