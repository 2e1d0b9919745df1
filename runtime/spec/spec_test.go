package spec

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

func TestSuffixDraft(t *testing.T) {
	// "a b c d a b c e a b" → suffix "a b" last seen at 4 followed by c e a b;
	// two earlier occurrences (0 and 4): both continue with c, then d vs e.
	hist := []int{1, 2, 3, 4, 1, 2, 3, 5, 1, 2}
	drafts, probs := DefaultSuffix.Draft(hist, 3)
	if !slices.Equal(drafts, []int{3, 5, 1}) {
		t.Fatalf("drafts %v, want [3 5 1]", drafts)
	}
	if !slices.Equal(probs, []float64{1, 0.5, 0.5}) {
		t.Errorf("probs %v, want [1 0.5 0.5]", probs)
	}
	// The longest match wins: "3 5 1 2" occurs once, earlier.
	hist = []int{9, 3, 5, 1, 2, 7, 8, 2, 3, 5, 1, 2}
	drafts, _ = DefaultSuffix.Draft(hist, 2)
	if !slices.Equal(drafts, []int{7, 8}) {
		t.Errorf("drafts %v, want [7 8] from the 4-token match", drafts)
	}
	if d, _ := DefaultSuffix.Draft([]int{1, 2, 3, 4}, 3); d != nil {
		t.Errorf("no earlier match, got drafts %v", d)
	}
	// Drafts never run past the end of the history.
	if d, _ := DefaultSuffix.Draft([]int{5, 6, 5, 6}, 4); !slices.Equal(d, []int{5, 6}) {
		t.Errorf("drafts %v, want [5 6]", d)
	}
}

// Speculative sampling reproduces the target distribution whatever the
// drafter proposes: a chi-square test over a 5-token vocabulary, with a
// drafter distribution q far from p, and with a deterministic drafter.
func TestVerifyPreservesDistribution(t *testing.T) {
	p := []float64{0.5, 0.2, 0.15, 0.1, 0.05}
	q := []float64{0.05, 0.1, 0.15, 0.2, 0.5}
	rng := rand.New(rand.NewSource(1))
	const n = 200000
	for _, name := range []string{"sampled draft", "deterministic draft"} {
		counts := make([]float64, len(p))
		for i := 0; i < n; i++ {
			var tok int
			if name == "sampled draft" {
				tok, _ = Verify(p, q, Sample(q, rng), rng)
			} else {
				tok, _ = Verify(p, nil, 3, rng)
			}
			counts[tok]++
		}
		var chi2 float64
		for i := range p {
			e := p[i] * n
			chi2 += (counts[i] - e) * (counts[i] - e) / e
		}
		// 4 degrees of freedom: P(χ² > 18.47) = 0.001.
		if chi2 > 18.47 {
			t.Errorf("%s: χ² = %.1f, counts %v for p %v", name, chi2, counts, p)
		}
	}
}

// simulate runs a gate (or a fixed depth when fixed ≥ 0) against windows of
// cost T(n) = 1 + rho·(n−1) (±5% noise) whose drafts are each accepted with
// probability accept(step), and returns tokens per unit time over the steps
// in [from, to).
func simulate(g *Gate, fixed int, accept func(step int) float64, rho float64, steps, from int, seed int64) float64 {
	rng := rand.New(rand.NewSource(seed))
	var tokens, time float64
	for s := 0; s < steps; s++ {
		k := fixed
		if fixed < 0 {
			k = g.Pick(SourceSuffix, g.MaxDepth, nil)
		}
		a := accept(s)
		acc := 0
		for acc < k && rng.Float64() < a {
			acc++
		}
		cost := (1 + rho*float64(k)) * (1 + 0.05*(2*rng.Float64()-1))
		if g != nil {
			g.ObserveWindow(k+1, cost)
			g.ObserveVerify(SourceSuffix, k, acc, nil)
		}
		if s >= from {
			tokens += float64(acc + 1)
			time += cost
		}
	}
	return tokens / time
}

// bestFixed is the brute-force optimum over fixed depths 0…4 for acceptance
// a: E(k)/T(k+1).
func bestFixed(a, rho float64) (int, float64) {
	best, bestV := 0, 0.0
	for k := 0; k <= 4; k++ {
		e, run := 1.0, 1.0
		for j := 0; j < k; j++ {
			run *= a
			e += run
		}
		if v := e / (1 + rho*float64(k)); v > bestV {
			best, bestV = k, v
		}
	}
	return best, bestV
}

func TestGatePicksBestDepth(t *testing.T) {
	for _, c := range []struct {
		name      string
		a, rho    float64
		wantDepth int
	}{
		{"high acceptance, cheap rows", 0.9, 0.15, 4},
		{"mid acceptance", 0.6, 0.3, 1},
		{"low acceptance", 0.2, 0.3, 0},
		{"high acceptance, streaming-priced rows", 0.85, 0.6, 2},
	} {
		k, opt := bestFixed(c.a, c.rho)
		if k != c.wantDepth {
			t.Fatalf("%s: the brute-force optimum is depth %d, the case expects %d", c.name, k, c.wantDepth)
		}
		var got float64
		for seed := int64(1); seed <= 3; seed++ {
			got += simulate(NewGate(4), -1, func(int) float64 { return c.a }, c.rho, 6000, 1000, seed) / 3
		}
		fixed := simulate(nil, k, func(int) float64 { return c.a }, c.rho, 6000, 1000, 9)
		t.Logf("%s: gate %.3f tokens/unit, best fixed depth %d %.3f (analytic %.3f)", c.name, got, k, fixed, opt)
		if got < 0.98*opt {
			t.Errorf("%s: gate reaches %.3f, less than 98%% of the best fixed depth's %.3f", c.name, got, opt)
		}
	}
}

func TestGateAdaptsToRegimeSwitch(t *testing.T) {
	const rho = 0.3
	accept := func(step int) float64 {
		if step < 3000 {
			return 0.9
		}
		return 0.15
	}
	g := NewGate(4)
	before := simulate(g, -1, accept, rho, 3000, 500, 3)
	_, optBefore := bestFixed(0.9, rho)
	// Continue the same gate into the low regime; judge after a short settling.
	rng := rand.New(rand.NewSource(4))
	var tokens, time float64
	for s := 3000; s < 7000; s++ {
		k := g.Pick(SourceSuffix, 4, nil)
		acc := 0
		for acc < k && rng.Float64() < accept(s) {
			acc++
		}
		cost := 1 + rho*float64(k)
		g.ObserveWindow(k+1, cost)
		g.ObserveVerify(SourceSuffix, k, acc, nil)
		if s >= 3200 {
			tokens += float64(acc + 1)
			time += cost
		}
	}
	after := tokens / time
	_, optAfter := bestFixed(0.15, rho)
	t.Logf("before the switch %.3f (optimum %.3f), after %.3f (optimum %.3f); %s", before, optBefore, after, optAfter, g.Report())
	if before < 0.98*optBefore || after < 0.98*optAfter {
		t.Errorf("gate %.3f / %.3f, optimum %.3f / %.3f", before, after, optBefore, optAfter)
	}
}

// With the drafter's own probabilities, the gate drafts where they are high
// and not where they are low, within one regime of measured acceptance.
func TestGateUsesDrafterProbabilities(t *testing.T) {
	g := NewGate(4)
	for i := 0; i < 200; i++ { // calibrate: the drafter says 0.5, half are accepted
		g.ObserveWindow(1, 1)
		g.ObserveWindow(2, 1.3)
		g.ObserveWindow(3, 1.6)
		g.ObserveVerify(SourceMTP, 1, i%2, []float64{0.5})
	}
	if k := g.Pick(SourceMTP, 2, []float64{0.95, 0.9}); k == 0 {
		t.Errorf("confident drafts declined")
	}
	if k := g.Pick(SourceMTP, 2, []float64{0.05, 0.05}); k != 0 {
		t.Errorf("hopeless drafts taken: k = %d", k)
	}
	if v := g.Value(SourceMTP, 1, []float64{0.5}); math.Abs(v-1.5/1.3) > 0.02 {
		t.Errorf("value of one calibrated draft %.3f, want %.3f", v, 1.5/1.3)
	}
}
