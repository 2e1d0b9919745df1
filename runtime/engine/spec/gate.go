package spec

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Draft sources the gate keeps separate statistics for.
const (
	SourceMTP    = 0
	SourceSuffix = 1
	numSources   = 2
)

// ema is an exponential moving average with memory n samples; it starts as
// the plain mean of its first samples, so early values are not biased
// toward zero.
type ema struct {
	v float64
	n int
}

func (e *ema) add(x float64, memory int) {
	e.n++
	w := 1 / float64(min(e.n, memory))
	e.v += w * (x - e.v)
}

// Gate is the online spec gate: per step it picks how many drafts a window
// carries, k = argmax E(k)/cost(k), from measured acceptance and measured
// window times. E(k) = 1 + a1 + a1·a2 + …; cost(k) = (T(k+1) + drafting(k) +
// re-run(k)) / T(1), where re-run(k) is the expected cost of running the
// kept rows again after a rejection; it drafts only when that beats a plain
// step. It never changes the output, only the window size.
type Gate struct {
	MaxDepth int // most drafts per window
	// Memories of the averages, in samples.
	AcceptMemory, TimeMemory int
	// ProbeEvery: probe one deeper than the pick every so many picks (every
	// ProbeEvery/4 while no decode window of that size is timed). PlainEvery:
	// force a plain step after so many drafted windows, so T(1) stays fresh.
	ProbeEvery, PlainEvery int
	// ProbeMargin: a probe's estimated value must reach this share of the
	// pick's value.
	ProbeMargin float64
	// MaxBackoff: a probe after which the probed depth is still estimated
	// worse than the pick doubles the probe interval for that depth, up to
	// this factor; a probe that makes it the pick resets it.
	MaxBackoff int
	// RerunShare is what re-running n kept rows after a rejection costs, as
	// a share of T(n), until a re-run is measured: 0 for a verifier that
	// keeps per-row state (nothing to re-run); the engine, which restores a
	// snapshot and re-runs, sets 1.
	RerunShare float64
	// HeadFlush: while the MTP head does not run, the rows it misses are
	// fed (and it drafts) once this many are pending, if drafting could pay
	// at all and a row of the head costs at most HeadShare of T(1) (RunHead).
	HeadFlush int
	HeadShare float64
	// Costs, when set, prices a window of n rows instead of the measured
	// times (in any unit; re-runs at RerunShare): for a backend that knows
	// its prices, and for tests whose decisions must not depend on the
	// machine's timings.
	Costs func(rows int) float64

	acc       [numSources][]ema // P(draft j accepted | drafts before it accepted)
	prob      [numSources][]ema // the drafter's own probability for accepted-or-judged drafts j
	rowTime   map[int]*ema      // T(n), seconds per decode window of n rows
	prior     map[int]*ema      // prefill windows of n rows: T(n) until a decode window of n rows is measured
	rerun     ema               // a re-run's time ÷ T(its rows)
	draftCost [numSources]ema   // seconds per drafted token
	feedRow   ema               // seconds per row of an MTP head window: a catch-up's price
	picks     int
	drafted   int // drafted windows since the last plain one

	backoff    map[int]int // probe interval factor per draft count
	sinceProbe int         // picks since the last probe
	probed     int         // draft count of the last pick's probe, judged at the next pick (0: none)

	// counters for the report
	declines, probes, plains, shadows int
	headRuns, headSkips, caughtUp     int
}

// NewGate returns a gate for up to maxDepth drafts with colibri's memories.
func NewGate(maxDepth int) *Gate {
	g := &Gate{MaxDepth: maxDepth, AcceptMemory: 16, TimeMemory: 8, ProbeEvery: 16, PlainEvery: 64, ProbeMargin: 0.75,
		MaxBackoff: 8, HeadFlush: 64, HeadShare: 0.05, rowTime: map[int]*ema{}, prior: map[int]*ema{}, backoff: map[int]int{}}
	for s := range g.acc {
		g.acc[s] = make([]ema, maxDepth)
		g.prob[s] = make([]ema, maxDepth)
	}
	return g
}

// ObserveWindow records the wall time of a decode window of n rows (the
// window alone: a re-run after a rejection goes to ObserveRerun).
func (g *Gate) ObserveWindow(n int, seconds float64) {
	addTo(g.rowTime, n, seconds, g.TimeMemory)
}

// ObserveRerun records the wall time of re-running the n kept rows of a
// window whose drafts were rejected (state restored, kept rows fed again).
// The gate keeps it as a share of T(n) and charges each window size its
// expected re-run, by the chance of each rejection point: so a drop in
// acceptance raises a window's cost at once, and window timings stay
// comparable to prefill's.
func (g *Gate) ObserveRerun(n int, seconds float64) {
	if t := g.windowTime(n); n > 0 && t > 0 && g.Costs == nil {
		g.rerun.add(seconds/t, g.TimeMemory)
	}
}

// ObservePrefill records the wall time of a prefill window of n rows (one
// that computes every row's logits, like a decode window): free timings
// that stand in for T(n) until a decode window of that size is measured.
func (g *Gate) ObservePrefill(n int, seconds float64) {
	addTo(g.prior, n, seconds, g.TimeMemory)
}

func addTo(m map[int]*ema, n int, x float64, memory int) {
	e, ok := m[n]
	if !ok {
		e = &ema{}
		m[n] = e
	}
	e.add(x, memory)
}

// ObserveDrafting records the cost of drafting n tokens from a source.
func (g *Gate) ObserveDrafting(source, n int, seconds float64) {
	if n > 0 {
		g.draftCost[source].add(seconds/float64(n), g.TimeMemory)
	}
}

// ObserveVerify records a verify window: of the judged drafts (with the
// drafter's probabilities), the first accepted were accepted.
func (g *Gate) ObserveVerify(source, judged, accepted int, probs []float64) {
	g.observeAcceptance(source, 0, judged, accepted, probs)
}

// ObserveShadow records drafts that were not fed but judged against the
// tokens decoding produced anyway: draft j would have been accepted iff it
// equals the token that came (greedy), and at temperature > 0 that happens
// with the probability speculative sampling accepts it, so the estimate
// stays unbiased. Drafts from on are judged (those before were fed and
// accepted, or from is 0 after a plain step), the first accepted of all of
// them stood. Acceptance is then measured for free while the gate declines
// or feeds fewer drafts than it has, so probes only have to price windows
// and a depth it stopped feeding is not stuck with an old estimate.
func (g *Gate) ObserveShadow(source, from, judged, accepted int, probs []float64) {
	g.shadows++
	g.observeAcceptance(source, from, judged, accepted, probs)
}

func (g *Gate) observeAcceptance(source, from, judged, accepted int, probs []float64) {
	for j := from; j < judged && j < g.MaxDepth; j++ {
		// Draft j is judged only if the ones before it were accepted.
		if j > accepted {
			break
		}
		ok := 0.0
		if j < accepted {
			ok = 1
		}
		g.acc[source][j].add(ok, g.AcceptMemory)
		if j < len(probs) {
			g.prob[source][j].add(probs[j], g.AcceptMemory)
		}
	}
}

// timing is T(n) as measured: a decode window, else a prefill window.
func (g *Gate) timing(n int) (*ema, bool) {
	if e, ok := g.rowTime[n]; ok {
		return e, true
	}
	e, ok := g.prior[n]
	return e, ok
}

// windowTime is T(n): measured, or extrapolated from a least-squares line
// through the sizes measured so far (one size: proportional to 1 + ρ(n−1)
// with ρ = 0.5; none: n).
func (g *Gate) windowTime(n int) float64 {
	if g.Costs != nil {
		return g.Costs(n)
	}
	if e, ok := g.timing(n); ok {
		return e.v
	}
	var sx, sy, sxx, sxy, k float64
	var one, oneV float64
	for _, m := range g.sizes() {
		e, _ := g.timing(m)
		x := float64(m)
		sx, sy, sxx, sxy, k = sx+x, sy+e.v, sxx+x*x, sxy+x*e.v, k+1
		one, oneV = x, e.v
	}
	switch {
	case k == 0:
		return float64(n)
	case k == 1:
		per := oneV / (1 + 0.5*(one-1))
		return per * (1 + 0.5*float64(n-1))
	}
	slope := (k*sxy - sx*sy) / (k*sxx - sx*sx)
	icpt := (sy - slope*sx) / k
	return math.Max(icpt+slope*float64(n), 1e-12)
}

// sizes are the window sizes with a timing, ascending (a fixed order keeps
// the fit's rounding the same run to run).
func (g *Gate) sizes() []int {
	var out []int
	for n := range g.rowTime {
		out = append(out, n)
	}
	for n := range g.prior {
		if _, ok := g.rowTime[n]; !ok {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// acceptPrior is the weight, in samples, of the prior an acceptance
// estimate starts from: one or two lucky drafts do not make a deep window
// look certain.
const acceptPrior = 2

// measuredAcceptance is a_j from what was measured, pulled toward a prior
// by acceptPrior samples: 0.5 for the first position, the estimate of the
// position before for the others (drafts deeper in a chain rarely do
// better). The pull fades as samples accumulate.
func (g *Gate) measuredAcceptance(source, j int) float64 {
	est := 0.5
	for i := 0; i <= j; i++ {
		a := &g.acc[source][i]
		n := float64(a.n)
		est = (a.v*n + est*acceptPrior) / (n + acceptPrior)
	}
	return est
}

// acceptance estimates a_j for this step: the drafter's own probability
// scaled by the calibration (measured acceptance ÷ mean drafter probability
// at that position) when the drafter gives probabilities, else the measured
// acceptance.
func (g *Gate) acceptance(source, j int, probs []float64) float64 {
	if j >= len(probs) || probs[j] < 0 {
		return g.measuredAcceptance(source, j)
	}
	a, p := &g.acc[source][j], &g.prob[source][j]
	if a.n == 0 || p.n == 0 || p.v <= 0 {
		return probs[j]
	}
	return math.Min(1, probs[j]*a.v/p.v)
}

// Value is E(k)/cost(k) for k drafts with the given drafter probabilities.
func (g *Gate) Value(source, k int, probs []float64) float64 {
	return g.value(source, k, func(j int) float64 { return g.acceptance(source, j, probs) }, 0)
}

// value is E(k)/cost(k) at acceptance a(j) for draft j, with extra seconds
// of drafting (a catch-up) added to the window's cost.
func (g *Gate) value(source, k int, a func(j int) float64, extra float64) float64 {
	share := g.RerunShare
	if g.rerun.n > 0 {
		share = g.rerun.v
	}
	// E(k), and the re-run's expected cost: with m < k drafts accepted (the
	// chance that the first m pass and the next fails) m+1 rows run again.
	e, run, rerun := 1.0, 1.0, 0.0
	for j := 0; j < k; j++ {
		a := a(j)
		if share > 0 {
			rerun += run * (1 - a) * share * g.windowTime(j+1)
		}
		run *= a
		e += run
	}
	drafting := extra
	if g.draftCost[source].n > 0 {
		drafting += float64(k) * g.draftCost[source].v
	}
	return e / ((g.windowTime(k+1) + drafting + rerun) / g.windowTime(1))
}

// ObserveHeadFeed records the wall time of an MTP head window over n rows
// of the trunk (a step's committed rows, a catch-up of rows it was not fed):
// what catching up costs per row.
func (g *Gate) ObserveHeadFeed(n int, seconds float64) {
	if n > 0 {
		g.feedRow.add(seconds/float64(n), g.TimeMemory)
	}
}

// RunHead says whether the MTP head should run after this step, to draft
// the next one, when it was not fed catchUp committed rows since it last
// ran: running it means feeding those rows first, so their price
// (ObserveHeadFeed's per row) is charged to the next window's drafts, on top
// of the drafting itself. It runs when that window is worth more than a
// plain step at the measured acceptance (no drafter probabilities yet: the
// head makes them). It also runs when HeadFlush rows are pending, drafting
// could pay at all (every draft accepted, no catch-up) and a row of the head
// costs at most HeadShare of a plain step: then the rows are fed while the
// catch-up is still short, and the drafts it yields are judged against the
// tokens that come, which keeps the acceptance estimates fresh while the
// gate declines. While T(1) is unmeasured it does not run (the first pick is
// a plain step anyway).
func (g *Gate) RunHead(catchUp int) bool {
	if _, ok := g.rowTime[1]; !ok && g.Costs == nil {
		g.headSkips++
		return false
	}
	extra := 0.0
	if g.feedRow.n > 0 {
		extra = float64(catchUp) * g.feedRow.v
	}
	measured := func(j int) float64 { return g.measuredAcceptance(SourceMTP, j) }
	certain := func(int) float64 { return 1 }
	run, pays := false, false
	for k := 1; k <= g.MaxDepth; k++ {
		run = run || g.value(SourceMTP, k, measured, extra) > 1
		pays = pays || g.value(SourceMTP, k, certain, 0) > 1
	}
	// Keeping the head fed costs a row of it per token however the rows are
	// batched: worth it for fresh estimates only while that is a small share
	// of a plain step.
	cheap := g.feedRow.n == 0 || g.feedRow.v <= g.HeadShare*g.windowTime(1)
	if run || pays && cheap && catchUp >= g.HeadFlush {
		g.headRuns++
		g.caughtUp += catchUp
		return true
	}
	g.headSkips++
	return false
}

// Pick chooses how many of the available drafts (with the drafter's
// probabilities; nil when it has none) the next window carries.
func (g *Gate) Pick(source, available int, probs []float64) int {
	g.picks++
	g.sinceProbe++
	maxK := min(available, g.MaxDepth)
	if maxK == 0 {
		return 0
	}
	// T(1) is the unit every cost is measured in: measure it first rather
	// than price windows against a guess.
	_, measured := g.rowTime[1]
	if !measured && g.Costs == nil && g.plains == 0 || g.drafted >= g.PlainEvery {
		g.drafted = 0
		g.plains++
		return 0
	}
	best, bestV := 0, 1.0 // drafting must beat a plain step
	for k := 1; k <= maxK; k++ {
		if v := g.Value(source, k, probs); v > bestV {
			best, bestV = k, v
		}
	}
	if best == 0 {
		g.declines++
	}
	if k := g.probed; k > 0 {
		// The last probe refreshed the estimates at its depth: if they
		// still say it loses, it confirmed a loss.
		if best >= k {
			g.backoff[k] = 1
		} else {
			g.backoff[k] = min(2*max(g.backoff[k], 1), max(g.MaxBackoff, 1))
		}
		g.probed = 0
	}
	// Probe one deeper now and then, more often while that size is
	// unmeasured, so a stale estimate can recover — but only when the deeper
	// window is estimated within ProbeMargin of the best: a probe that is
	// known to be a loss (drafts that keep failing, rows that cost what they
	// do) is not worth its window. Each probe that confirms a loss doubles
	// the wait before the next one at that depth.
	if k := best + 1; k <= maxK {
		every := g.ProbeEvery
		if _, ok := g.rowTime[k+1]; !ok {
			every = max(g.ProbeEvery/4, 1)
		}
		every *= max(g.backoff[k], 1)
		if g.sinceProbe >= every && g.Value(source, k, probs) >= g.ProbeMargin*bestV {
			best = k
			g.probes++
			g.sinceProbe = 0
			g.probed = k
		}
	}
	if best > 0 {
		g.drafted++
	}
	return best
}

// Report is a one-line summary: T(1), T(n)/T(1), acceptance by position,
// declines and probes.
func (g *Gate) Report() string {
	var b strings.Builder
	if g.Costs != nil {
		b.WriteString("spec gate: priced by a cost model")
		for n := 2; n <= g.MaxDepth+1; n++ {
			fmt.Fprintf(&b, ", T(%d)/T(1) %.2f", n, g.Costs(n)/g.Costs(1))
		}
	} else {
		fmt.Fprintf(&b, "spec gate: T(1) %.2f ms", 1e3*g.windowTime(1))
		for n := 2; n <= g.MaxDepth+1; n++ {
			if e, ok := g.rowTime[n]; ok {
				fmt.Fprintf(&b, ", T(%d)/T(1) %.2f", n, e.v/g.windowTime(1))
			} else if e, ok := g.prior[n]; ok {
				fmt.Fprintf(&b, ", T(%d)/T(1) %.2f (prefill)", n, e.v/g.windowTime(1))
			}
		}
	}
	if g.rerun.n > 0 {
		fmt.Fprintf(&b, ", re-run %.2f·T(n)", g.rerun.v)
	}
	for s, name := range []string{"mtp", "suffix"} {
		var parts []string
		for j := range g.acc[s] {
			if g.acc[s][j].n > 0 {
				parts = append(parts, fmt.Sprintf("%.2f", g.acc[s][j].v))
			}
		}
		if len(parts) > 0 {
			fmt.Fprintf(&b, "; %s acceptance %s", name, strings.Join(parts, "/"))
		}
	}
	fmt.Fprintf(&b, "; %d picks, %d declines, %d probes, %d forced plain, %d shadow-judged", g.picks, g.declines, g.probes, g.plains, g.shadows)
	if g.headRuns+g.headSkips > 0 {
		fmt.Fprintf(&b, "; MTP head ran after %d steps, skipped %d, caught up %d rows", g.headRuns, g.headSkips, g.caughtUp)
		if g.feedRow.n > 0 {
			fmt.Fprintf(&b, " (%.2f ms a row)", 1e3*g.feedRow.v)
		}
	}
	return b.String()
}
