package grammar

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/strata-llm/strata/runtime/engine/sample"
)

// BenchmarkConstrainedSample is the sampler's cost per token under a
// grammar, inside a string's body (where a reply spends most tokens) and
// after an object's key (few tokens allowed), on a row of logits the size
// of the vocabulary: unconstrained greedy for reference; check-first, where
// the argmax is allowed (the common case); and the full mask, where it is
// refused, computed afresh ("mask") or found in the constraint's cache
// ("cached": the state recurs, as between a string's characters).
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
		for _, at := range []struct{ name, prefix, best, refused string }{
			{"string", states[3].prefix, "is", `"}`},
			{"key", states[2].prefix, `"`, "is"},
		} {
			allowed, _ := tokenOf(v, at.best)
			refused, _ := tokenOf(v, at.refused)
			row := func(top int) []float32 {
				r := append([]float32(nil), logits...)
				r[top] = 100
				return r
			}
			s, _ := sample.New(sample.Params{})
			b.Run(fmt.Sprintf("%s/%s/unconstrained", vname, at.name), func(b *testing.B) {
				r := row(allowed)
				for b.Loop() {
					s.Sample(r, nil)
				}
			})
			c := constraintAt(b, g, v, at.prefix, nil)
			c.Mask() // the vocabulary's fast path for this state, made once per vocabulary
			st := c.st
			run := func(name string, top int, cached bool) {
				b.Run(fmt.Sprintf("%s/%s/%s", vname, at.name, name), func(b *testing.B) {
					r := row(top)
					s.SetConstraint(c)
					for b.Loop() {
						c.st = st // the state before the token, as Sample advances it
						if !cached {
							clear(c.cache)
						}
						if t := s.Sample(r, nil); t == refused || top == allowed && t != allowed {
							b.Fatalf("sampled %d", t)
						}
					}
				})
			}
			run("check-first", allowed, true)
			run("mask", refused, false)
			run("cached", refused, true)
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
