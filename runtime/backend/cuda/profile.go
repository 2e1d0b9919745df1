package cuda

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/strata-llm/strata/graph"
)

// A WindowProfile is where one window's GPU time goes: the whole window
// timed by events (direct and replayed, the naive serial graph and the
// pruned one on streams), and each dispatch timed alone on one stream,
// summed per kernel (a family in one storage format) with the bytes it
// moves.
type WindowProfile struct {
	Rows, Dispatches, Barriers int
	// Medians over the timed runs of the whole window.
	Naive, Pruned, NaiveReplayed, PrunedReplayed time.Duration
	// DispatchSum is the sum of the per-dispatch medians (serial, an event
	// between every two dispatches: launch gaps on the stream included).
	DispatchSum time.Duration
	// ReplayedSum is the sum of the dispatches timed as a replayed window
	// runs them (ReplayedDispatchTimes): next to PrunedReplayed it says
	// how much the streams overlap and how much the GPU idles between
	// dependent kernels.
	ReplayedSum time.Duration
	Repeats     int             // launches per replayed chain
	Kernels     []KernelProfile // largest GPU time first
	// Shapes splits the kernels by shape (their constants and grid):
	// largest replayed time first.
	Shapes []ShapeProfile
}

// ShapeProfile is the dispatches of one kernel with one shape.
type ShapeProfile struct {
	Kernel, Shape string
	Dispatches    int
	// Replayed is their time replayed (ReplayedDispatchTimes), summed.
	Replayed time.Duration
	Bytes    int64
	Inexact  bool
}

// KernelProfile is one kernel's share of a window.
type KernelProfile struct {
	Kernel     string
	Family     graph.Family
	Dispatches int
	Time       time.Duration
	Replayed   time.Duration // ReplayedDispatchTimes, summed
	// Bytes is what the family's dispatches read and write: the declared
	// ranges, but only the routed experts' parts of the expert arena.
	// Inexact where a declared range is a whole KV cache or embedding
	// table of which a dispatch reads a part: Bytes is then an upper bound.
	Bytes   int64
	Inexact bool
}

// SetWindowParams writes the params a window of g's rows reads at position
// pos with token ids 100+7i: what a profile needs to run a window outside a
// generation (the caches then hold what the last generation left).
func (p *Program) SetWindowParams(pos int) error {
	tokens := make([]int, p.Graph.Rows)
	for i := range tokens {
		tokens[i] = 100 + 7*i
	}
	return p.Graph.WriteParams(p.mem.Buffer(graph.ParamsBuffer), tokens, pos)
}

// Profile times the window as it is bound (params written by the caller):
// reps timed runs of each mode after warm ones, and each dispatch alone.
func (p *Program) Profile(warm, reps int) (*WindowProfile, error) {
	g := p.Graph
	wp := &WindowProfile{Rows: g.Rows, Dispatches: len(g.Dispatches), Barriers: len(p.Barriers())}
	med := func(s Schedule, replay bool) (time.Duration, error) {
		ts, err := p.Time(s, replay, warm, reps)
		if err != nil || len(ts) == 0 {
			return 0, err
		}
		return ts[len(ts)/2], nil
	}
	var err error
	for _, m := range []struct {
		dst    *time.Duration
		s      Schedule
		replay bool
	}{{&wp.Naive, Serial, false}, {&wp.Pruned, Concurrent, false}, {&wp.NaiveReplayed, Serial, true}, {&wp.PrunedReplayed, Concurrent, true}} {
		if *m.dst, err = med(m.s, m.replay); err != nil {
			return nil, err
		}
	}
	times, err := p.DispatchTimes(reps)
	if err != nil {
		return nil, err
	}
	// A chain long enough that the graph's own launch is a small part of
	// it, for a decode window's microsecond kernels; a prefill window's
	// take milliseconds.
	repeats, rreps := 16, reps
	if g.Rows > 8 {
		repeats, rreps = 2, min(reps, 3)
	}
	wp.Repeats = repeats
	replayed, err := p.ReplayedDispatchTimes(repeats, rreps)
	if err != nil {
		return nil, err
	}
	kinds := map[string]string{}
	for _, buf := range g.Buffers {
		kinds[buf.Name] = buf.Kind
	}
	fams := map[string]*KernelProfile{}
	shapes := map[string]*ShapeProfile{}
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		f := fams[d.Kernel]
		if f == nil {
			f = &KernelProfile{Kernel: d.Kernel, Family: d.Family}
			fams[d.Kernel] = f
		}
		shape := dispatchShape(d)
		sp := shapes[d.Kernel+" "+shape]
		if sp == nil {
			sp = &ShapeProfile{Kernel: d.Kernel, Shape: shape}
			shapes[d.Kernel+" "+shape] = sp
		}
		n, exact := p.movedBytes(i, kinds)
		f.Time += times[i]
		f.Replayed += replayed[i]
		f.Dispatches++
		f.Bytes += n
		f.Inexact = f.Inexact || !exact
		sp.Replayed += replayed[i]
		sp.Dispatches++
		sp.Bytes += n
		sp.Inexact = sp.Inexact || !exact
		wp.DispatchSum += times[i]
		wp.ReplayedSum += replayed[i]
	}
	for _, f := range fams {
		wp.Kernels = append(wp.Kernels, *f)
	}
	sort.Slice(wp.Kernels, func(i, j int) bool {
		a, b := wp.Kernels[i], wp.Kernels[j]
		return a.Time > b.Time || a.Time == b.Time && a.Kernel < b.Kernel
	})
	for _, sp := range shapes {
		wp.Shapes = append(wp.Shapes, *sp)
	}
	sort.Slice(wp.Shapes, func(i, j int) bool {
		a, b := wp.Shapes[i], wp.Shapes[j]
		return a.Replayed > b.Replayed || a.Replayed == b.Replayed && a.Kernel+a.Shape < b.Kernel+b.Shape
	})
	return wp, nil
}

// dispatchShape names what makes two dispatches of a kernel the same work:
// their constants (the window's rows left out when it is 1) and grid.
func dispatchShape(d *graph.Dispatch) string {
	var b strings.Builder
	for _, c := range d.Consts {
		fmt.Fprintf(&b, "%s=%d ", c.Name, c.Value)
	}
	fmt.Fprintf(&b, "grid %d×%d×%d", d.Grid[0], d.Grid[1], d.Grid[2])
	return b.String()
}

// movedBytes is what dispatch i reads and writes: its declared ranges,
// except that a routed-expert kernel reads only the experts routed to
// (min(rows·top-k, experts) of them, the gate and up or the down part of
// each) rather than the whole arena it declares. Exact is false where a
// declared range is a whole KV/indexer cache or embedding table of which
// the kernel reads a part.
func (p *Program) movedBytes(i int, kinds map[string]string) (n int64, exact bool) {
	g := p.Graph
	d := &g.Dispatches[i]
	exact = true
	size := func(r graph.Range) int64 {
		if r.Offset == 0 && r.Size == 0 {
			return int64(len(p.mem.Buffer(r.Buffer)))
		}
		return r.Size
	}
	for _, r := range append(append([]graph.Range{}, d.Reads...), d.Writes...) {
		switch kinds[r.Buffer] {
		case graph.KindExperts:
			continue
		case graph.KindCache:
			exact = false
		}
		if d.Family == "embed" && kinds[r.Buffer] != graph.KindScratch {
			exact = false
		}
		n += size(r)
	}
	if d.Family == "moe_gate_up" || d.Family == "moe_down" {
		stride, _ := d.Const("stride")
		down, _ := d.Const("down_off")
		experts, _ := d.Const("experts")
		k, _ := d.Const("top_k")
		part := down
		if d.Family == "moe_down" {
			part = stride - down
		}
		n += min(int64(g.Rows)*k, experts) * part
	}
	return n, exact
}

// Write prints the profile as markdown: the window's times, then one row
// per kernel with its bandwidth as a fraction of copyBW (bytes read plus
// written per second of a device-to-device copy; 0: not measured).
func (wp *WindowProfile) Write(w io.Writer, copyBW float64) {
	ratio := func(a, b time.Duration) float64 { return float64(a) / float64(b) }
	fmt.Fprintf(w, "T=%d: %d dispatches, %d barriers; window GPU time: naive %v, pruned %v (×%.3f), replayed %v (×%.3f of pruned); dispatches one by one %v (launched from the host), %v (each replayed alone, %d in a chain)\n\n",
		wp.Rows, wp.Dispatches, wp.Barriers, wp.Naive, wp.Pruned, ratio(wp.Pruned, wp.Naive), wp.PrunedReplayed, ratio(wp.PrunedReplayed, wp.Pruned), wp.DispatchSum, wp.ReplayedSum, wp.Repeats)
	fmt.Fprintf(w, "| kernel | dispatches | GPU time, host-launched | share | per dispatch | replayed | per dispatch | bytes moved | GB/s replayed | of copy |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, f := range wp.Kernels {
		share := 100 * ratio(f.Time, wp.DispatchSum)
		per := f.Time / time.Duration(f.Dispatches)
		rper := f.Replayed / time.Duration(f.Dispatches)
		fmt.Fprintf(w, "| %s | %d | %v | %.1f%% | %v | %v | %v | %s |\n", f.Kernel, f.Dispatches, f.Time, share, per, f.Replayed, rper, bandwidth(f.Bytes, f.Inexact, f.Replayed, copyBW))
	}
	fmt.Fprintf(w, "\nBy shape (replayed, largest first):\n\n| kernel | shape | dispatches | replayed | per dispatch | share of replayed | bytes moved | GB/s | of copy |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, s := range wp.Shapes {
		share := 100 * ratio(s.Replayed, wp.ReplayedSum)
		fmt.Fprintf(w, "| %s | %s | %d | %v | %v | %.1f%% | %s |\n", s.Kernel, s.Shape, s.Dispatches, s.Replayed, s.Replayed/time.Duration(s.Dispatches), share, bandwidth(s.Bytes, s.Inexact, s.Replayed, copyBW))
	}
}

// bandwidth is the table cells bytes moved, GB/s and fraction of copyBW
// (0: not measured) for bytes moved in t.
func bandwidth(bytes int64, inexact bool, t time.Duration, copyBW float64) string {
	bw := float64(bytes) / t.Seconds()
	switch {
	case inexact:
		return fmt.Sprintf("≤ %.1f MB (whole cache or table declared) | — | —", float64(bytes)/1e6)
	case copyBW > 0:
		return fmt.Sprintf("%.2f MB | %.0f | %.3f", float64(bytes)/1e6, bw/1e9, bw/copyBW)
	}
	return fmt.Sprintf("%.2f MB | %.0f | —", float64(bytes)/1e6, bw/1e9)
}
