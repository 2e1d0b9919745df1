package graph

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Counts are the audit numbers of a window or of one layer of it.
type Counts struct {
	Dispatches int `json:"dispatches"`
	// Barriers is how many dispatches have a barrier before them.
	Barriers int `json:"barriers"`
	// BarriersNaive is one barrier per dispatch (but the window's first).
	BarriersNaive int `json:"barriers_naive"`
	// BarrierLowerBound is the fewest barriers any order needs (LowerBound).
	// A layer's share is how far its dispatches raise the running bound, so
	// the layers add up to the window.
	BarrierLowerBound int `json:"barrier_lower_bound"`
	// BarrierBoundWithWaits is the same bound for orders that also keep
	// each dispatch on its side of its host wait, as the shared expert's
	// place between signal and wait requires; placed barriers above it are
	// the scheduler's, between the two bounds the host points'.
	BarrierBoundWithWaits int `json:"barrier_bound_with_waits"`
	HostPoints            int `json:"host_points"`
	// Bytes of the declared ranges. These are conservative: a routed-expert
	// dispatch declares every expert of its layer and attention the whole KV
	// cache, hence the split by buffer kind.
	BytesRead          int64            `json:"bytes_read"`
	BytesWritten       int64            `json:"bytes_written"`
	BytesReadByKind    map[string]int64 `json:"bytes_read_by_kind"`
	BytesWrittenByKind map[string]int64 `json:"bytes_written_by_kind"`
	// CriticalPath is the most dispatches on one dependency chain (inside the
	// layer, for a layer): no schedule runs them in fewer steps.
	CriticalPath int `json:"critical_path"`
}

// LayerAudit is the audit of the dispatches of one layer (-1: outside the
// layers: embedding, final norm, head).
type LayerAudit struct {
	Layer int `json:"layer"`
	Counts
}

// Audit reports what the passes made of one window graph.
type Audit struct {
	Model string `json:"model"`
	Kind  string `json:"kind,omitempty"` // the graph's kind: the trunk window or the MTP head
	Rows  int    `json:"rows"`
	Counts
	ICBReplayable int          `json:"icb_replayable"` // commands recorded once and replayed
	ICBRuns       int          `json:"icb_runs"`       // replay calls per window
	Layers        []LayerAudit `json:"layers"`         // ascending, -1 first
}

// NewAudit audits g as it is (normally after Optimize).
func NewAudit(g *Graph) *Audit {
	preds := Dependencies(g.Dispatches)
	levels := barrierLevels(g, preds, false)
	waitLevels := barrierLevels(g, preds, true)
	a := &Audit{Model: g.Model, Kind: g.Kind, Rows: g.Rows, Layers: []LayerAudit{}}
	byLayer := map[int]*Counts{}
	layerOf := func(l int) *Counts {
		c := byLayer[l]
		if c == nil {
			c = &Counts{}
			byLayer[l] = c
		}
		return c
	}
	running, waitRunning := 0, 0
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		raise := max(levels[i]-running, 0)
		running += raise
		waitRaise := max(waitLevels[i]-waitRunning, 0)
		waitRunning += waitRaise
		for _, c := range []*Counts{&a.Counts, layerOf(d.Layer)} {
			c.Dispatches++
			if d.Barrier {
				c.Barriers++
			}
			if i > 0 {
				c.BarriersNaive++
			}
			c.BarrierLowerBound += raise
			c.BarrierBoundWithWaits += waitRaise
			c.addBytes(g, d)
		}
	}
	for _, h := range g.HostPoints {
		a.HostPoints++
		layerOf(h.Layer).HostPoints++
	}
	for _, n := range chainLengths(preds, func(int) bool { return true }) {
		a.CriticalPath = max(a.CriticalPath, n)
	}
	for l, c := range byLayer {
		inLayer := func(p int) bool { return g.Dispatches[p].Layer == l }
		for i, n := range chainLengths(preds, inLayer) {
			if inLayer(i) {
				c.CriticalPath = max(c.CriticalPath, n)
			}
		}
		a.Layers = append(a.Layers, LayerAudit{Layer: l, Counts: *c})
	}
	slices.SortFunc(a.Layers, func(x, y LayerAudit) int { return x.Layer - y.Layer })
	if g.ICB != nil {
		a.ICBReplayable = g.ICB.Replayable()
		a.ICBRuns = len(g.ICB.Runs)
	}
	return a
}

func (c *Counts) addBytes(g *Graph, d *Dispatch) {
	if c.BytesReadByKind == nil {
		c.BytesReadByKind, c.BytesWrittenByKind = map[string]int64{}, map[string]int64{}
	}
	kind := func(r Range) string {
		if b, ok := g.Buffer(r.Buffer); ok {
			return b.Kind
		}
		return r.Buffer
	}
	for _, r := range d.Reads {
		c.BytesRead += r.Size
		c.BytesReadByKind[kind(r)] += r.Size
	}
	for _, r := range d.Writes {
		c.BytesWritten += r.Size
		c.BytesWrittenByKind[kind(r)] += r.Size
	}
}

// JSON is the audit as one indented JSON object.
func (a *Audit) JSON() ([]byte, error) {
	b, err := json.MarshalIndent(a, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encoding the audit of %s/T=%d: %w", a.Model, a.Rows, err)
	}
	return append(b, '\n'), nil
}

// WriteText writes the audit as a short summary and a table, one row per
// layer.
func (a *Audit) WriteText(w io.Writer) error {
	var b strings.Builder
	kind := ""
	if a.Kind != "" {
		kind = " " + a.Kind
	}
	fmt.Fprintf(&b, "%s%s, T=%d: %d dispatches, %d host points\n", a.Model, kind, a.Rows, a.Dispatches, a.HostPoints)
	fmt.Fprintf(&b, "  barriers: %d placed, %d naive, %d lower bound%s, %d with the host waits kept\n",
		a.Barriers, a.BarriersNaive, a.BarrierLowerBound, overBound(a.Barriers, a.BarrierLowerBound), a.BarrierBoundWithWaits)
	fmt.Fprintf(&b, "  critical path: %d dispatches\n", a.CriticalPath)
	fmt.Fprintf(&b, "  declared bytes read %s (%s), written %s (%s)\n", bytesText(a.BytesRead), byKindText(a.BytesReadByKind), bytesText(a.BytesWritten), byKindText(a.BytesWrittenByKind))
	fmt.Fprintf(&b, "  ICB: %d of %d commands replayable, in %d runs; none patched per window\n\n", a.ICBReplayable, a.Dispatches, a.ICBRuns)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "layer\tdispatches\tbarriers\tnaive\tbound\twith waits\thost points\tcritical path\tread\twritten\t")
	for _, l := range a.Layers {
		name := fmt.Sprint(l.Layer)
		if l.Layer < 0 {
			name = "other"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", name, l.Dispatches, l.Barriers, l.BarriersNaive,
			l.BarrierLowerBound, l.BarrierBoundWithWaits, l.HostPoints, l.CriticalPath, bytesText(l.BytesRead), bytesText(l.BytesWritten))
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t\n", a.Dispatches, a.Barriers, a.BarriersNaive,
		a.BarrierLowerBound, a.BarrierBoundWithWaits, a.HostPoints, a.CriticalPath, bytesText(a.BytesRead), bytesText(a.BytesWritten))
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("formatting the audit of %s/T=%d: %w", a.Model, a.Rows, err)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("writing the audit of %s/T=%d: %w", a.Model, a.Rows, err)
	}
	return nil
}

func overBound(placed, bound int) string {
	if bound == 0 {
		return ""
	}
	return fmt.Sprintf(" (placed = bound %+.1f%%)", 100*float64(placed-bound)/float64(bound))
}

// bytesText prints a byte count in binary units with one decimal.
func bytesText(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	v, u := float64(n), 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

func byKindText(m map[string]int64) string {
	kinds := make([]string, 0, len(m))
	for k := range m {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = k + " " + bytesText(m[k])
	}
	return strings.Join(parts, ", ")
}
