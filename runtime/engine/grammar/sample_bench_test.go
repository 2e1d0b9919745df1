package grammar

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/strata-llm/strata/runtime/engine/sample"
)

// BenchmarkConstrainedSample is the sampler's cost per greedy token under
// a grammar, inside a string's body (where a reply spends most tokens) and
// after an object's key (few tokens allowed), on a row of logits the size
// of the vocabulary: unconstrained for reference; "check-first", the
// argmax allowed (the common case); "next", the argmax refused and the
// next allowed (found among the best eight); "mask", the best eight
// refused, the mask computed afresh; "cached", the same with the mask in
// the constraint's cache (the state recurs, as between a string's
// characters); "sampled", llama.cpp's default chain, the cache cleared.
func BenchmarkConstrainedSample(b *testing.B) {
	vs := loadVocabs(b)
	g := toolGrammar(b)
	for _, vname := range []string{"qwen3-151K", "248K"} {
		v := vs[vname]
		rng := rand.New(rand.NewSource(1))
		logits := make([]float32, v.Size())
		for i := range logits {
			logits[i] = float32(rng.NormFloat64())
		}
		for _, at := range []struct{ name, prefix, best string }{
			{"string", states[3].prefix, "is"},
			{"key", states[2].prefix, `"`},
		} {
			allowed, _ := tokenOf(v, at.best)
			c := constraintAt(b, g, v, at.prefix, nil)
			mask := c.Mask() // also makes the vocabulary's fast path for this state, once
			var refused []int
			for id := 0; len(refused) < 9; id++ {
				if mask[id>>6]>>(id&63)&1 == 0 {
					refused = append(refused, id)
				}
			}
			// row puts the refused ids on top (refusedTop of them), then the
			// allowed one.
			row := func(refusedTop int) []float32 {
				r := append([]float32(nil), logits...)
				for i, id := range refused[:refusedTop] {
					r[id] = float32(200 - i)
				}
				r[allowed] = 100
				return r
			}
			st := c.st
			s, _ := sample.New(sample.Params{})
			b.Run(fmt.Sprintf("%s/%s/unconstrained", vname, at.name), func(b *testing.B) {
				r := row(0)
				s.SetConstraint(nil)
				for b.Loop() {
					s.Sample(r, nil)
				}
			})
			run := func(name string, refusedTop int, cached bool) {
				b.Run(fmt.Sprintf("%s/%s/%s", vname, at.name, name), func(b *testing.B) {
					r := row(refusedTop)
					s.SetConstraint(c)
					for b.Loop() {
						c.st = st // the state before the token, as Sample advances it
						if !cached {
							clear(c.cache)
						}
						if t := s.Sample(r, nil); t != allowed {
							b.Fatalf("sampled %d, want %d", t, allowed)
						}
					}
				})
			}
			run("check-first", 0, true)
			run("next", 1, true)
			run("mask", 9, false)
			run("cached", 9, true)
			// llama.cpp's default chain (top-k 40, top-p 0.95, min-p 0.05,
			// T 0.8): the top-k's allowed ids found one by one, or the mask.
			b.Run(fmt.Sprintf("%s/%s/sampled", vname, at.name), func(b *testing.B) {
				r := row(0)
				sp, _ := sample.New(sample.Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, Seed: 1})
				sp.SetConstraint(c)
				for b.Loop() {
					c.st = st
					clear(c.cache)
					sp.Sample(r, nil)
				}
			})
		}
	}
}

// BenchmarkNewVocab is the one-time cost of a vocabulary's tries.
func BenchmarkNewVocab(b *testing.B) {
	tok, err := qwen3()
	if err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		NewVocab(tok.Vocab(), tok.TokenBytes, tok.IsSpecial)
	}
}
