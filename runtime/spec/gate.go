package spec

import (
	"fmt"
	"math"
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
// window times. E(k) = 1 + a1 + a1·a2 + …; cost(k) = (T(k+1) + drafting(k)) /
// T(1); it drafts only when that beats a plain step. It never changes the
// output, only the window size.
type Gate struct {
	MaxDepth int // most drafts per window
	// Memories of the averages, in samples.
	AcceptMemory, TimeMemory int
	// ProbeEvery: probe one deeper than the pick every so many picks (every
	// ProbeEvery/4 while that size has fewer than 3 timings). PlainEvery:
	// force a plain step after so many drafted windows, so T(1) stays fresh.
	ProbeEvery, PlainEvery int
	// ProbeMargin: a probe's estimated value must reach this share of the
	// pick's value.
	ProbeMargin float64

	acc       [numSources][]ema // P(draft j accepted | drafts before it accepted)
	prob      [numSources][]ema // the drafter's own probability for accepted-or-judged drafts j
	rowTime   map[int]*ema      // T(n), seconds per window of n rows
	draftCost [numSources]ema   // seconds per drafted token
	picks     int
	drafted   int // drafted windows since the last plain one

	// counters for the report
	declines, probes, plains int
}

// NewGate returns a gate for up to maxDepth drafts with colibri's memories.
func NewGate(maxDepth int) *Gate {
	g := &Gate{MaxDepth: maxDepth, AcceptMemory: 16, TimeMemory: 8, ProbeEvery: 16, PlainEvery: 64, ProbeMargin: 0.75, rowTime: map[int]*ema{}}
	for s := range g.acc {
		g.acc[s] = make([]ema, maxDepth)
		g.prob[s] = make([]ema, maxDepth)
	}
	return g
}

// ObserveWindow records the wall time of a window of n rows.
func (g *Gate) ObserveWindow(n int, seconds float64) {
	e, ok := g.rowTime[n]
	if !ok {
		e = &ema{}
		g.rowTime[n] = e
	}
	e.add(seconds, g.TimeMemory)
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
	for j := 0; j < judged && j < g.MaxDepth; j++ {
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

// windowTime is T(n): measured, or extrapolated from a least-squares line
// through the sizes measured so far (one size: proportional to 1 + ρ(n−1)
// with ρ = 0.5; none: n).
func (g *Gate) windowTime(n int) float64 {
	if e, ok := g.rowTime[n]; ok {
		return e.v
	}
	var sx, sy, sxx, sxy, k float64
	for m, e := range g.rowTime {
		x := float64(m)
		sx, sy, sxx, sxy, k = sx+x, sy+e.v, sxx+x*x, sxy+x*e.v, k+1
	}
	switch {
	case k == 0:
		return float64(n)
	case k == 1:
		for m, e := range g.rowTime {
			per := e.v / (1 + 0.5*float64(m-1))
			return per * (1 + 0.5*float64(n-1))
		}
	}
	slope := (k*sxy - sx*sy) / (k*sxx - sx*sx)
	icpt := (sy - slope*sx) / k
	return math.Max(icpt+slope*float64(n), 1e-12)
}

// acceptance estimates a_j for this step: the drafter's own probability
// scaled by the calibration (measured acceptance ÷ mean drafter probability
// at that position) when the drafter gives probabilities, else the measured
// acceptance. An unmeasured position is assumed 0.5: worth a probe.
func (g *Gate) acceptance(source, j int, probs []float64) float64 {
	a := &g.acc[source][j]
	measured := 0.5
	if a.n > 0 {
		measured = a.v
	}
	if j >= len(probs) || probs[j] < 0 {
		return measured
	}
	p := &g.prob[source][j]
	if a.n == 0 || p.n == 0 || p.v <= 0 {
		return probs[j]
	}
	return math.Min(1, probs[j]*a.v/p.v)
}

// Value is E(k)/cost(k) for k drafts with the given drafter probabilities.
func (g *Gate) Value(source, k int, probs []float64) float64 {
	e, run := 1.0, 1.0
	for j := 0; j < k; j++ {
		run *= g.acceptance(source, j, probs)
		e += run
	}
	t1 := g.windowTime(1)
	drafting := 0.0
	if g.draftCost[source].n > 0 {
		drafting = float64(k) * g.draftCost[source].v
	}
	return e / ((g.windowTime(k+1) + drafting) / t1)
}

// Pick chooses how many of the available drafts (with the drafter's
// probabilities; nil when it has none) the next window carries.
func (g *Gate) Pick(source, available int, probs []float64) int {
	g.picks++
	maxK := min(available, g.MaxDepth)
	if maxK == 0 {
		return 0
	}
	if g.drafted >= g.PlainEvery {
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
	// Probe one deeper now and then, more often while that size is barely
	// measured, so a stale estimate can recover — but only when the deeper
	// window is estimated within ProbeMargin of the best: a probe that is
	// known to be a loss (drafts that keep failing, rows that cost what they
	// do) is not worth its window.
	if best < maxK {
		every := g.ProbeEvery
		if e, ok := g.rowTime[best+2]; !ok || e.n < 3 {
			every = max(g.ProbeEvery/4, 1)
		}
		if g.picks%every == 0 && g.Value(source, best+1, probs) >= g.ProbeMargin*bestV {
			best++
			g.probes++
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
	fmt.Fprintf(&b, "spec gate: T(1) %.2f ms", 1e3*g.windowTime(1))
	for n := 2; n <= g.MaxDepth+1; n++ {
		if e, ok := g.rowTime[n]; ok {
			fmt.Fprintf(&b, ", T(%d)/T(1) %.2f", n, e.v/g.windowTime(1))
		}
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
	fmt.Fprintf(&b, "; %d picks, %d declines, %d probes, %d forced plain", g.picks, g.declines, g.probes, g.plains)
	return b.String()
}
