// Package eval scores a model's next-token logits against text, as
// llama.cpp's llama-perplexity does: perplexity with its standard error,
// top-1 accuracy, and the KL divergence from a base model's distributions.
package eval

import (
	"fmt"
	"math"
	"slices"
)

// Chunks returns the start of each window of ctx tokens over n tokens: the
// first count non-overlapping windows (count 0: all that fit), or with
// spread, count windows spaced evenly from 0 to n−ctx−1 (the start of
// tiny-go's train.py evaluation windows, torch.linspace(...).long()).
func Chunks(n, ctx, count int, spread bool) ([]int, error) {
	if ctx < 2 {
		return nil, fmt.Errorf("windows of %d tokens: need at least 2", ctx)
	}
	fit := n / ctx
	if fit == 0 {
		return nil, fmt.Errorf("%d tokens are fewer than one window of %d", n, ctx)
	}
	if count < 0 {
		return nil, fmt.Errorf("%d windows: want ≥ 0", count)
	}
	var out []int
	switch {
	case spread:
		if count < 2 {
			return nil, fmt.Errorf("spread windows: want a count ≥ 2, got %d", count)
		}
		if n-ctx-1 < 0 {
			return nil, fmt.Errorf("%d tokens leave no room to spread windows of %d", n, ctx)
		}
		step := float64(n-ctx-1) / float64(count-1)
		for i := range count {
			out = append(out, int(float64(i)*step))
		}
	default:
		if count == 0 || count > fit {
			count = fit
		}
		for i := range count {
			out = append(out, i*ctx)
		}
	}
	return out, nil
}

// LogSoftmax returns log p over the logits, in float64 sums.
func LogSoftmax(logits []float32) []float32 {
	mx := float64(slices.Max(logits))
	var s float64
	for _, v := range logits {
		s += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(s)
	out := make([]float32, len(logits))
	for i, v := range logits {
		out[i] = float32(float64(v) - lse)
	}
	return out
}

func argmax(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// Scores accumulates per-token results.
type Scores struct {
	nll     []float64 // −log p(target) per scored token
	top1    int       // argmax == target
	kl      []float64 // KL(base ‖ model) per token, with a base
	sameTop int       // argmax == the base's argmax
}

// Add scores one position: its log-probabilities and the true next token.
func (s *Scores) Add(logprobs []float32, target int) {
	s.nll = append(s.nll, -float64(logprobs[target]))
	if argmax(logprobs) == target {
		s.top1++
	}
}

// AddBase compares one position's log-probabilities with the base model's.
func (s *Scores) AddBase(logprobs, base []float32) {
	var kl float64
	for i, b := range base {
		if p := math.Exp(float64(b)); p > 0 {
			kl += p * (float64(b) - float64(logprobs[i]))
		}
	}
	s.kl = append(s.kl, max(kl, 0))
	if argmax(logprobs) == argmax(base) {
		s.sameTop++
	}
}

// N is the number of scored tokens.
func (s *Scores) N() int { return len(s.nll) }

// Perplexity is exp(mean NLL) and its standard error (from the NLL's
// standard error of the mean, to first order, as llama-perplexity reports).
func (s *Scores) Perplexity() (ppl, stderr float64) {
	n := float64(len(s.nll))
	if n == 0 {
		return math.NaN(), math.NaN()
	}
	var sum, sum2 float64
	for _, v := range s.nll {
		sum += v
		sum2 += v * v
	}
	mean := sum / n
	ppl = math.Exp(mean)
	if n < 2 {
		return ppl, math.NaN()
	}
	v := (sum2/n - mean*mean) * n / (n - 1)
	return ppl, ppl * math.Sqrt(max(v, 0)/n)
}

// MeanNLL is the mean negative log-likelihood, nats per token.
func (s *Scores) MeanNLL() float64 {
	var sum float64
	for _, v := range s.nll {
		sum += v
	}
	return sum / float64(len(s.nll))
}

// Top1 is the fraction of positions whose argmax is the true next token.
func (s *Scores) Top1() float64 { return float64(s.top1) / float64(max(len(s.nll), 1)) }

// KL summarizes KL(base ‖ model): mean, 99th percentile, max, and the
// fraction of positions with the same top token as the base; ok is false
// without a base.
func (s *Scores) KL() (mean, p99, mx, sameTop float64, ok bool) {
	if len(s.kl) == 0 {
		return 0, 0, 0, 0, false
	}
	v := slices.Clone(s.kl)
	slices.Sort(v)
	var sum float64
	for _, x := range v {
		sum += x
	}
	i := min(int(math.Ceil(0.99*float64(len(v))))-1, len(v)-1)
	return sum / float64(len(v)), v[max(i, 0)], v[len(v)-1], float64(s.sameTop) / float64(len(v)), true
}
