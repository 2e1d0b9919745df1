package sample

import (
	"math/rand"
	"testing"
)

// The chain on a Qwen-sized row (151,936 logits) with a 64-token penalty
// window: what sampling adds to each decode step. "peaked" is a row as a
// language model makes them, most of the mass on a few dozen tokens (normal
// noise plus 40 tokens raised by 14 to 18, 99.9% of the mass); "flat" (noise of deviation 3)
// is top-p's worst case, where the nucleus is most of the vocabulary.
func BenchmarkChain(b *testing.B) {
	const V = 151936
	rng := rand.New(rand.NewSource(1))
	peaked, flat := make([]float32, V), make([]float32, V)
	for i := range peaked {
		peaked[i] = float32(rng.NormFloat64())
		flat[i] = float32(rng.NormFloat64() * 3)
	}
	for range 40 {
		peaked[rng.Intn(V)] += float32(14 + 4*rng.Float64())
	}
	hist := make([]int, 64)
	for i := range hist {
		hist[i] = rng.Intn(V)
	}
	for _, row := range []struct {
		name string
		row  []float32
	}{{"peaked", peaked}, {"flat", flat}} {
		b.Run(row.name, func(b *testing.B) { benchChain(b, row.row, hist) })
	}
}

func benchChain(b *testing.B, row []float32, hist []int) {
	for _, c := range []struct {
		name string
		p    Params
	}{
		{"greedy", Params{}},
		{"greedy+penalties", Params{RepeatPenalty: 1.1, PenaltyLastN: 64}},
		{"temperature", Params{Temperature: 0.8}},
		{"llama.cpp-defaults", Params{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, PenaltyLastN: 64}},
		{"top-p-only", Params{Temperature: 0.8, TopP: 0.95}},
		{"min-p-only", Params{Temperature: 0.8, MinP: 0.05}},
	} {
		b.Run(c.name, func(b *testing.B) {
			s, err := New(c.p)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				s.Sample(row, hist)
			}
		})
	}
}
