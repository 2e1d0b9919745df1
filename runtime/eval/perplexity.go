package eval

import (
	"fmt"

	"github.com/strata-llm/strata/runtime/engine"
)

// Options say how Perplexity feeds and scores the windows.
type Options struct {
	Ctx   int // tokens per window
	First int // score the tokens after this many of each window
	Rows  int // rows per engine window (1: a token at a time, as decode feeds)
	// MTP scores the MTP head too, teacher-forced: its logits at t against
	// token t+2, given the true t+1.
	MTP bool
	// Base, when set, is compared with each scored position (or keeps it to
	// save, when the base is being made).
	Base *KLBase
	// Window, when set, is called after each window with its number (from
	// 1) and the trunk's scores so far: for a running perplexity.
	Window func(n int, trunk *Scores)
}

// Perplexity feeds each window of opt.Ctx tokens at starts from a fresh
// state and scores the tokens after opt.First against the logits of the
// position before them, as llama-perplexity does; mtp holds the MTP head's
// scores with opt.MTP.
func Perplexity(m *engine.Model, tokens, starts []int, opt Options) (trunk, mtp Scores, err error) {
	switch {
	case opt.Ctx < 2:
		return trunk, mtp, fmt.Errorf("windows of %d tokens: need at least 2", opt.Ctx)
	case opt.First < 0 || opt.First >= opt.Ctx-1:
		return trunk, mtp, fmt.Errorf("scoring from position %d of windows of %d: want 0 ≤ first < %d", opt.First, opt.Ctx, opt.Ctx-1)
	case opt.MTP && !m.HasMTP():
		return trunk, mtp, fmt.Errorf("model %s has no MTP head", m.Config.Name)
	}
	for i, s := range starts {
		if s < 0 || s+opt.Ctx > len(tokens) {
			return trunk, mtp, fmt.Errorf("window %d starts at token %d: %d tokens of %d do not fit", i+1, s, opt.Ctx, len(tokens))
		}
		w := tokens[s : s+opt.Ctx]
		var logits, heads [][]float32
		if opt.MTP {
			logits, heads, err = m.TeacherForced(w, opt.Rows)
		} else {
			logits, err = m.TrunkForced(w, opt.Rows)
		}
		if err != nil {
			return trunk, mtp, fmt.Errorf("window %d (tokens %d…%d): %w", i+1, s, s+opt.Ctx-1, err)
		}
		for j := opt.First; j < opt.Ctx-1; j++ {
			lp := LogSoftmax(logits[j])
			trunk.Add(lp, w[j+1])
			if opt.Base != nil {
				if err := opt.Base.Add(&trunk, lp); err != nil {
					return trunk, mtp, err
				}
			}
			if opt.MTP && j < opt.Ctx-2 {
				mtp.Add(LogSoftmax(heads[j]), w[j+2])
			}
		}
		if opt.Window != nil {
			opt.Window(i+1, &trunk)
		}
	}
	return trunk, mtp, nil
}
