package sample

import (
	"math"
	"slices"
	"strings"
	"testing"
)

// logw returns logits whose softmax at temperature 1 is w normalised, so the
// expected distributions below are fractions of w worked out by hand.
func logw(w ...float64) []float32 {
	l := make([]float32, len(w))
	for i, v := range w {
		l[i] = float32(math.Log(v))
	}
	return l
}

func frac(num ...float64) []float64 {
	var z float64
	for _, v := range num {
		z += v
	}
	out := make([]float64, len(num))
	for i, v := range num {
		out[i] = v / z
	}
	return out
}

func near(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol {
			return false
		}
	}
	return true
}

// Weights 8 4 2 1 1 (of 16): p = .5 .25 .125 .0625 .0625 at temperature 1.
var base = logw(8, 4, 2, 1, 1)

func TestChainDistributions(t *testing.T) {
	s2 := math.Sqrt2
	cases := []struct {
		name string
		p    Params
		want []float64
	}{
		{"plain", Params{Temperature: 1}, frac(8, 4, 2, 1, 1)},
		{"temperature ½ squares the weights", Params{Temperature: 0.5}, frac(64, 16, 4, 1, 1)},
		{"top-k 2", Params{Temperature: 1, TopK: 2}, frac(8, 4, 0, 0, 0)},
		{"top-k ≥ vocab is off", Params{Temperature: 1, TopK: 9}, frac(8, 4, 2, 1, 1)},
		{"top-p 0.7 keeps the token crossing it", Params{Temperature: 1, TopP: 0.7}, frac(8, 4, 0, 0, 0)},
		{"top-p 0.8", Params{Temperature: 1, TopP: 0.8}, frac(8, 4, 2, 0, 0)},
		{"top-p 0.4 keeps the best", Params{Temperature: 1, TopP: 0.4}, frac(1, 0, 0, 0, 0)},
		{"min-p 0.2 (floor .1)", Params{Temperature: 1, MinP: 0.2}, frac(8, 4, 2, 0, 0)},
		{"min-p 0.3 (floor .15)", Params{Temperature: 1, MinP: 0.3}, frac(8, 4, 0, 0, 0)},
		// top-k first, then top-p over the renormalised top 2 (2/3 ≥ .6):
		// the other order would keep two tokens.
		{"top-k before top-p", Params{Temperature: 1, TopK: 2, TopP: 0.6}, frac(1, 0, 0, 0, 0)},
		// top-p at temperature 1 keeps 8 and 4 (.75 ≥ .6), then temperature 2
		// takes square roots; temperature first would keep three tokens.
		{"temperature after top-p", Params{Temperature: 2, TopP: 0.6}, frac(2*s2, 2, 0, 0, 0)},
		// top-p .9 keeps four (.9375); min-p .2 then drops weight 1 (< 1.6).
		{"top-p then min-p", Params{Temperature: 1, TopP: 0.9, MinP: 0.2}, frac(8, 4, 2, 0, 0)},
		{"greedy is one-hot", Params{TopK: 3, TopP: 0.5}, frac(1, 0, 0, 0, 0)},
	}
	for _, c := range cases {
		s, err := New(c.p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		// 1e-7: the logits are float32 roundings of the logs.
		if got := s.Probs(base, nil); !near(got, c.want, 1e-7) {
			t.Errorf("%s: probabilities %v, want %v", c.name, got, c.want)
		}
	}
}

func TestTopKTiesAndLargeVocab(t *testing.T) {
	// Ties go to the lower id, as the greedy argmax does.
	s, _ := New(Params{Temperature: 1, TopK: 2})
	if got := s.Probs([]float32{1, 3, 3, 3}, nil); !near(got, []float64{0, .5, .5, 0}, 1e-12) {
		t.Errorf("top-2 of 1 3 3 3: %v, want 0 .5 .5 0", got)
	}
	// The heap keeps the k largest of a long row: logits 0..V-1 permuted.
	const V, k = 1000, 7
	row := make([]float32, V)
	for i := range row {
		row[i] = float32((i * 379) % V) // 379 is prime to 1000: a permutation
	}
	s, _ = New(Params{Temperature: 1, TopK: k})
	p := s.Probs(row, nil)
	var z float64
	for j := range k {
		z += math.Exp(-float64(j))
	}
	for i, v := range p {
		want := 0.0
		if r := V - 1 - int(row[i]); r < k {
			want = math.Exp(-float64(r)) / z
		}
		if math.Abs(v-want) > 1e-12 {
			t.Fatalf("token %d (logit %v): p %v, want %v", i, row[i], v, want)
		}
	}
}

func TestPenalties(t *testing.T) {
	logits := []float32{2, -1, 0.5, 1}
	hist := []int{0, 1, 0} // token 0 twice, token 1 once
	cases := []struct {
		name string
		p    Params
		want []float64 // the penalised logits, by hand
	}{
		// Repetition 2: 2 → 1 (positive: divided), -1 → -2 (negative: multiplied).
		{"repeat", Params{RepeatPenalty: 2, PenaltyLastN: 64}, []float64{1, -2, 0.5, 1}},
		// Presence .5 once, frequency .25 per occurrence.
		{"presence+frequency", Params{PresencePenalty: 0.5, FrequencyPenalty: 0.25, PenaltyLastN: -1}, []float64{2 - 1, -1 - 0.75, 0.5, 1}},
		{"all three", Params{RepeatPenalty: 2, PresencePenalty: 0.5, FrequencyPenalty: 0.25, PenaltyLastN: 3}, []float64{0, -2.75, 0.5, 1}},
		// The window is the last token only (token 0, once).
		{"last-n 1", Params{RepeatPenalty: 2, FrequencyPenalty: 0.25, PenaltyLastN: 1}, []float64{0.75, -1, 0.5, 1}},
		{"last-n 0 is off", Params{RepeatPenalty: 2, FrequencyPenalty: 0.25}, []float64{2, -1, 0.5, 1}},
		// Below 1 encourages: 2 → 4, -1 → -0.5.
		{"repeat 0.5", Params{RepeatPenalty: 0.5, PenaltyLastN: 8}, []float64{4, -0.5, 0.5, 1}},
		{"negative presence encourages", Params{PresencePenalty: -1, PenaltyLastN: 8}, []float64{3, 0, 0.5, 1}},
	}
	for _, c := range cases {
		c.p.Temperature = 1
		s, err := New(c.p)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var z float64
		want := make([]float64, len(c.want))
		for i, v := range c.want {
			want[i] = math.Exp(v)
			z += want[i]
		}
		for i := range want {
			want[i] /= z
		}
		if got := s.Probs(logits, hist); !near(got, want, 1e-12) {
			t.Errorf("%s: %v, want softmax of %v = %v", c.name, got, c.want, want)
		}
	}
	// Greedy follows the penalised logits: with all three, token 3 (1)
	// beats token 0 (now 0).
	s, _ := New(Params{RepeatPenalty: 2, PresencePenalty: 0.5, FrequencyPenalty: 0.25, PenaltyLastN: 3})
	if got := s.Sample(logits, hist); got != 3 {
		t.Errorf("greedy with penalties: %d, want 3", got)
	}
	if got := s.Sample(logits, nil); got != 0 {
		t.Errorf("greedy with no history: %d, want 0", got)
	}
}

func TestValidate(t *testing.T) {
	bad := map[string]Params{
		"temperature":       {Temperature: math.NaN()},
		"top-k":             {TopK: -1},
		"top-p":             {TopP: 1.5},
		"min-p":             {MinP: -0.1},
		"repeat-penalty":    {RepeatPenalty: math.Inf(1)},
		"presence-penalty":  {PresencePenalty: 3},
		"frequency-penalty": {FrequencyPenalty: math.NaN()},
		"repeat-last-n":     {PenaltyLastN: -2},
	}
	for name, p := range bad {
		err := p.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), name+" is ") {
			t.Errorf("%s: error %v, want one naming %s", name, err, name)
		}
		if _, err := New(p); err == nil {
			t.Errorf("%s: New accepted %+v", name, p)
		}
	}
	good := []Params{{}, {Temperature: 0.7, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1.1, PenaltyLastN: 64, PresencePenalty: -2, FrequencyPenalty: 2}, {TopP: 1, MinP: 1, PenaltyLastN: -1}}
	for _, p := range good {
		if err := p.Validate(); err != nil {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

// FuzzChain: for any row and any valid parameters, the chain's output is a
// distribution (non-negative, sum 1) holding at most top-k tokens, always
// the penalised argmax, and Sample picks a token it gives mass.
func FuzzChain(f *testing.F) {
	f.Add(uint64(1), 0.8, 40, 0.95, 0.05, 1.1, 0.0, 0.0, 64)
	f.Add(uint64(2), 0.0, 0, 1.0, 0.0, 1.0, 0.5, -0.5, -1)
	f.Add(uint64(3), 5.0, 1, 0.01, 1.0, 0.3, 2.0, 2.0, 2)
	f.Fuzz(func(t *testing.T, seed uint64, temp float64, topK int, topP, minP, rep, pres, freq float64, lastN int) {
		p := Params{Temperature: temp, TopK: topK, TopP: topP, MinP: minP, RepeatPenalty: rep,
			PresencePenalty: pres, FrequencyPenalty: freq, PenaltyLastN: lastN, Seed: int64(seed)}
		s, err := New(p)
		if err != nil {
			return // invalid parameters are refused, not sampled
		}
		rng := seed | 1
		next := func() uint64 { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng }
		row := make([]float32, 1+int(next()%300))
		for i := range row {
			row[i] = float32(int64(next()%2000)-1000) / 100
		}
		hist := make([]int, next()%20)
		for i := range hist {
			hist[i] = int(next() % uint64(len(row)))
		}
		probs := slices.Clone(s.Probs(row, hist))
		var sum float64
		support := 0
		for _, v := range probs {
			if v < 0 || math.IsNaN(v) {
				t.Fatalf("probability %v", v)
			}
			sum += v
			if v > 0 {
				support++
			}
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("probabilities sum to %v", sum)
		}
		if topK > 0 && support > topK {
			t.Fatalf("%d tokens kept under top-k %d", support, topK)
		}
		g, _ := New(Params{RepeatPenalty: rep, PresencePenalty: pres, FrequencyPenalty: freq, PenaltyLastN: lastN})
		if best := g.Sample(row, hist); probs[best] == 0 {
			t.Fatalf("the penalised argmax %d has no mass", best)
		}
		if tok := s.Sample(row, hist); probs[tok] == 0 {
			t.Fatalf("sampled %d, which has no mass", tok)
		}
	})
}
