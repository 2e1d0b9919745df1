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

// T(1) is the unit of every cost: a fresh gate measures it with a plain step
// before it drafts, rather than pricing windows against a guess.
func TestGateMeasuresT1First(t *testing.T) {
	g := NewGate(3)
	g.ObservePrefill(4, 1.2) // four rows for little more than one: drafting looks cheap
	if k := g.Pick(SourceMTP, 3, []float64{0.99, 0.99, 0.99}); k != 0 {
		t.Fatalf("first pick %d drafts with T(1) unmeasured, want a plain step", k)
	}
	g.ObserveWindow(1, 1)
	if k := g.Pick(SourceMTP, 3, []float64{0.99, 0.99, 0.99}); k != 3 {
		t.Errorf("pick %d with confident drafts and T(4)/T(1) = 1.2, want 3; %s", k, g.Report())
	}
}

// Prefill windows price sizes no decode step has measured; a decode step of
// that size replaces them (it includes what decoding adds, re-runs).
func TestGatePrefillPrior(t *testing.T) {
	g := NewGate(3)
	g.ObserveWindow(1, 1)
	g.ObservePrefill(4, 4)
	for n, want := range map[int]float64{2: 2, 3: 3, 4: 4} {
		if got := g.windowTime(n); math.Abs(got-want) > 1e-9 {
			t.Errorf("T(%d) = %.3f from T(1) and the prefill T(4), want %.3f", n, got, want)
		}
	}
	g.ObserveWindow(4, 2.5)
	if got := g.windowTime(4); got != 2.5 {
		t.Errorf("T(4) = %.3f after a decode step of 2.5, want the decode step", got)
	}
	if got := g.windowTime(2); math.Abs(got-1.5) > 1e-9 {
		t.Errorf("T(2) = %.3f, want 1.5 on the line through the decode steps", got)
	}
}

// simOptions make simulateSteps behave like the engine around the gate.
type simOptions struct {
	rho      float64 // T(n) = 1 + rho·(n−1), ±5%
	rerun    bool    // a rejection re-runs the kept rows (priced as a window of that size)
	shadows  bool    // plain steps report their drafts against the tokens that came
	prefill  int     // rows of a prefill window timed before decoding (0: none)
	maxDepth int
}

// simulateSteps decodes steps windows under the gate (fixed ≥ 0: a fixed
// depth) and returns tokens per unit time over the steps from from on.
func simulateSteps(g *Gate, fixed int, accept func(step int) float64, o simOptions, steps, from int, seed int64) float64 {
	rng := rand.New(rand.NewSource(seed))
	cost := func(n int) float64 { return (1 + o.rho*float64(n-1)) * (1 + 0.05*(2*rng.Float64()-1)) }
	if g != nil {
		if o.rerun {
			g.RerunShare = 1 // what the engine tells its gate
		}
		if o.prefill > 0 {
			g.ObservePrefill(o.prefill, cost(o.prefill))
		}
	}
	var tokens, time float64
	for s := 0; s < steps; s++ {
		// The drafts of this step: each one right with probability a.
		a := accept(s)
		right := 0
		for right < o.maxDepth && rng.Float64() < a {
			right++
		}
		k := fixed
		if fixed < 0 {
			k = g.Pick(SourceSuffix, o.maxDepth, nil)
		}
		acc := min(right, k)
		window, rerun := cost(k+1), 0.0
		if o.rerun && acc < k {
			rerun = cost(acc + 1)
		}
		if g != nil {
			if k > 0 {
				g.ObserveVerify(SourceSuffix, k, acc, nil)
			}
			if o.shadows && acc == k && k < o.maxDepth {
				// The drafts past the fed ones, judged by the tokens that come.
				g.ObserveShadow(SourceSuffix, k, min(right+1, o.maxDepth), right, nil)
			}
			g.ObserveWindow(k+1, window)
			if rerun > 0 {
				g.ObserveRerun(acc+1, rerun)
			}
		}
		if s >= from {
			tokens += float64(acc + 1)
			time += window + rerun
		}
	}
	return tokens / time
}

// The benchmark's situation in simulation: rows that cost nearly what a
// plain step does (streaming: each row brings its own experts), a re-run
// after every rejection, and short runs, where every exploratory window
// shows. On drafts that mostly hit and on drafts that miss, the gate's
// tokens per unit time over the whole run stay within 3% of plain decoding
// (the best fixed depth here), on average over seeds.
func TestGateShortRunCostlyRows(t *testing.T) {
	o := simOptions{rho: 0.85, rerun: true, shadows: true, prefill: 4, maxDepth: 3}
	for _, c := range []struct {
		name string
		a    float64
	}{{"hits", 0.67}, {"misses", 0}} {
		var gate, plain float64
		const seeds = 20
		for seed := int64(1); seed <= seeds; seed++ {
			gate += simulateSteps(NewGate(3), -1, func(int) float64 { return c.a }, o, 45, 0, seed) / seeds
			plain += simulateSteps(nil, 0, func(int) float64 { return c.a }, o, 45, 0, seed) / seeds
		}
		t.Logf("%s: gate %.3f, plain %.3f tokens/unit (%.1f%%)", c.name, gate, plain, 100*(gate/plain-1))
		if gate < 0.97*plain {
			t.Errorf("%s: the gate makes %.3f tokens/unit over 45 steps, plain decoding %.3f", c.name, gate, plain)
		}
	}
}

func TestShadowJudgesChains(t *testing.T) {
	for _, c := range []struct {
		name              string
		drafts            []int
		from              int // drafts before were fed and accepted
		tokens            []int
		judged            []float64 // the acceptance sample expected per position (−1: none)
		pendingAfterwards bool
	}{
		{"first misses", []int{5, 6, 7}, 0, []int{9}, []float64{0, -1, -1}, false},
		{"two stand, the third misses", []int{5, 6, 7}, 0, []int{5, 6, 8}, []float64{1, 1, 0}, false},
		{"all stand", []int{5, 6}, 0, []int{5, 6, 1}, []float64{1, 1, -1}, false},
		{"waits for more tokens", []int{5, 6, 7}, 0, []int{5, 6}, []float64{-1, -1, -1}, true},
		{"past two fed drafts, the third stands", []int{5, 6, 7}, 2, []int{7}, []float64{-1, -1, 1}, false},
		{"past one fed draft, the second misses", []int{5, 6, 7}, 1, []int{9, 7}, []float64{-1, 0, -1}, false},
	} {
		g := NewGate(3)
		var sh Shadow
		sh.Start(SourceSuffix, c.drafts, nil, c.from)
		// Tokens arrive a step at a time, as the engine commits them.
		for _, tok := range c.tokens {
			sh.Advance(g, []int{tok})
		}
		if sh.Pending() != c.pendingAfterwards {
			t.Errorf("%s: pending %v, want %v", c.name, sh.Pending(), c.pendingAfterwards)
		}
		for j, want := range c.judged {
			a := g.acc[SourceSuffix][j]
			if want < 0 && a.n != 0 || want >= 0 && (a.n != 1 || a.v != want) {
				t.Errorf("%s: position %d has %d samples, mean %.2f; want %v", c.name, j+1, a.n, a.v, want)
			}
		}
	}
}

// A gate that declines still learns acceptance from shadow-judged drafts:
// when the text turns repetitive it starts drafting with no probe at all.
func TestGateShadowsFindAcceptance(t *testing.T) {
	accept := func(step int) float64 {
		if step < 500 {
			return 0.05
		}
		return 0.9
	}
	o := simOptions{rho: 0.3, rerun: true, maxDepth: 3}
	opt := 0.0 // the best fixed depth after the switch
	for k := 0; k <= 3; k++ {
		opt = max(opt, simulateSteps(nil, k, accept, o, 2000, 600, 1))
	}
	for _, shadows := range []bool{true, false} {
		o.shadows = shadows
		g := NewGate(3)
		g.ProbeEvery = 1 << 30 // no probes
		got := simulateSteps(g, -1, accept, o, 2000, 600, 1)
		t.Logf("shadows %v: %.3f tokens/unit after the switch (best fixed depth %.3f); %s", shadows, got, opt, g.Report())
		if shadows && got < 0.97*opt {
			t.Errorf("with shadows the gate makes %.3f tokens/unit after the switch, want ≥ 97%% of %.3f", got, opt)
		}
		if !shadows && got > 1.01 {
			t.Errorf("without shadows or probes the gate cannot see the switch, yet it made %.3f tokens/unit", got)
		}
	}
}

// Probes that keep confirming a loss come exponentially rarer: acceptance
// that makes one draft look close to paying (within ProbeMargin) but not
// paying, over 2000 steps.
func TestGateProbeBackoff(t *testing.T) {
	o := simOptions{rho: 0.85, rerun: true, shadows: true, maxDepth: 3}
	accept := func(int) float64 { return 0.7 }
	counts := map[int]int{}
	rates := map[int]float64{}
	for _, backoff := range []int{1, 8} {
		g := NewGate(3)
		g.MaxBackoff = backoff
		rates[backoff] = simulateSteps(g, -1, accept, o, 2000, 0, 5)
		counts[backoff] = g.probes
		t.Logf("max backoff %d: %.3f tokens/unit, %s", backoff, rates[backoff], g.Report())
	}
	plain := simulateSteps(nil, 0, accept, o, 2000, 0, 5)
	if counts[1] < 60 {
		t.Fatalf("without backoff only %d probes in 2000 steps: the case does not exercise probing", counts[1])
	}
	// Backoff doubles up to 8×: a probe every 16·8 steps once it has grown.
	if counts[8] > 2000/(16*8)+8 {
		t.Errorf("%d probes with backoff, want ≤ %d", counts[8], 2000/(16*8)+8)
	}
	if rates[8] < rates[1] || rates[8] < 0.99*plain {
		t.Errorf("with backoff %.3f tokens/unit, without %.3f, plain decoding %.3f", rates[8], rates[1], plain)
	}
}

// With a cost model the gate prices windows by it alone: it drafts from the
// first pick and measured times do not move it.
func TestGateCostModel(t *testing.T) {
	g := NewGate(3)
	g.Costs = func(n int) float64 { return 1 + 0.1*float64(n-1) }
	probs := []float64{0.9, 0.9, 0.9}
	if k := g.Pick(SourceMTP, 3, probs); k != 3 {
		t.Fatalf("first pick %d with cheap rows and confident drafts, want 3", k)
	}
	for i := 0; i < 20; i++ {
		g.ObserveWindow(1, 1)
		g.ObserveWindow(4, 100) // slow windows: ignored
		g.ObserveRerun(1, 100)
	}
	if k := g.Pick(SourceMTP, 3, probs); k != 3 {
		t.Errorf("pick %d after slow measured windows, want 3 (the cost model prices them)", k)
	}
}

// headGate is a gate that measured T(1) = 1 s, windows of n rows costing
// 1 + slope·(n−1), MTP acceptance a at every position, drafting at 0.05 s a
// draft and the head's rows at 0.1 s each.
func headGate(slope, a float64) *Gate {
	g := NewGate(3)
	g.RerunShare = 1
	for i := 0; i < 16; i++ {
		for n := 1; n <= 4; n++ {
			g.ObserveWindow(n, 1+slope*float64(n-1))
		}
		ok := 0
		if float64(i%10) < 10*a {
			ok = 3
		}
		g.ObserveVerify(SourceMTP, 3, ok, nil)
		g.ObserveDrafting(SourceMTP, 3, 0.15)
		g.ObserveHeadFeed(4, 0.4)
	}
	return g
}

// RunHead runs the MTP head when its next drafts are worth a plain step,
// the catch-up of the rows it missed included; feeds the missed rows once
// HeadFlush are pending only when drafting could pay at all; and never
// before T(1) is measured.
func TestRunHead(t *testing.T) {
	if NewGate(3).RunHead(0) {
		t.Error("a fresh gate runs the head before T(1) is measured")
	}
	good := headGate(0.1, 0.9) // cheap windows, drafts that hit
	if !good.RunHead(0) || !good.RunHead(5) {
		t.Errorf("cheap windows, acceptance 0.9: the head does not run; %s", good.Report())
	}
	// 50 rows to catch up cost 5 s, five plain steps: not worth one
	// window's drafts (fewer than HeadFlush rows: no flush either).
	if good.RunHead(50) {
		t.Errorf("a catch-up of 50 rows at 0.1 T(1) each is charged nothing; %s", good.Report())
	}
	miss := headGate(0.1, 0) // cheap windows, drafts that miss
	miss.HeadShare = 0.2
	if miss.RunHead(miss.HeadFlush - 1) {
		t.Errorf("drafts that miss: the head runs with %d rows pending", miss.HeadFlush-1)
	}
	if !miss.RunHead(miss.HeadFlush) {
		t.Errorf("cheap windows: %d pending rows are not fed (nor the acceptance refreshed)", miss.HeadFlush)
	}
	dear := headGate(1, 1) // a window costs what its rows cost: no draft can pay
	if dear.RunHead(0) || dear.RunHead(dear.HeadFlush) || dear.RunHead(10*dear.HeadFlush) {
		t.Errorf("windows of n rows cost n plain ones: the head runs; %s", dear.Report())
	}
	// A row of the head at a tenth of T(1): keeping it fed costs 10% a
	// token, too much to refresh estimates that say no.
	miss.HeadShare = 0.05
	if miss.RunHead(miss.HeadFlush) {
		t.Errorf("the head's rows cost 10%% of T(1) each: %d pending rows are fed anyway", miss.HeadFlush)
	}
}
