package graph

import (
	"fmt"
	"sort"
)

// Move says that the bytes of From now live at To (the same size): a weight
// tensor used in place from a mapped file instead of copied into the
// weights buffer.
type Move struct {
	From Range
	To   Range
}

// Relocate rewrites every reference g makes to a moved range (tensor
// placements, bindings, declared reads and writes, host-point reads,
// outputs) to where it moved, and declares the buffers it moved to (add).
// Every reference into a buffer something moved out of must lie inside one
// moved range (the caller moves everything there, if only to a compacted
// place in the same buffer): one outside all of them, across an edge, or
// binding the whole buffer is an error, and g is left unchanged. Since moved ranges are read-only
// weights, barriers stay valid; the ICB plan is rebuilt because buffer
// offsets decide which commands may replay.
func Relocate(g *Graph, moves []Move, add []Buffer) error {
	byBuf := map[string][]Move{}
	for _, m := range moves {
		if m.From.Size != m.To.Size || m.From.Size <= 0 {
			return fmt.Errorf("relocating %s [%d,+%d) to %s [%d,+%d): sizes differ or are empty", m.From.Buffer, m.From.Offset, m.From.Size, m.To.Buffer, m.To.Offset, m.To.Size)
		}
		byBuf[m.From.Buffer] = append(byBuf[m.From.Buffer], m)
	}
	for b, ms := range byBuf {
		sort.Slice(ms, func(i, j int) bool { return ms[i].From.Offset < ms[j].From.Offset })
		for i := 1; i < len(ms); i++ {
			if ms[i].From.Offset < ms[i-1].From.End() {
				return fmt.Errorf("relocating buffer %s: moved ranges [%d,%d) and [%d,%d) overlap", b, ms[i-1].From.Offset, ms[i-1].From.End(), ms[i].From.Offset, ms[i].From.End())
			}
		}
		byBuf[b] = ms
	}
	move := func(r Range) (Range, error) {
		ms := byBuf[r.Buffer]
		if len(ms) == 0 {
			return r, nil
		}
		if r.Offset == 0 && r.Size == 0 {
			return r, fmt.Errorf("a binding of all of buffer %s, parts of which moved", r.Buffer)
		}
		i := sort.Search(len(ms), func(i int) bool { return ms[i].From.End() > r.Offset })
		if i == len(ms) || ms[i].From.Offset >= max(r.End(), r.Offset+1) {
			return r, fmt.Errorf("range %s [%d,%d) lies outside every moved range", r.Buffer, r.Offset, r.End())
		}
		m := ms[i]
		if r.Offset < m.From.Offset || r.End() > m.From.End() {
			return r, fmt.Errorf("range %s [%d,%d) straddles the edge of a moved range [%d,%d)", r.Buffer, r.Offset, r.End(), m.From.Offset, m.From.End())
		}
		return Range{Buffer: m.To.Buffer, Offset: m.To.Offset + r.Offset - m.From.Offset, Size: r.Size}, nil
	}
	// Work on copies so a failure leaves g as it was.
	tensors := append([]Tensor(nil), g.Tensors...)
	for i := range tensors {
		t := &tensors[i]
		if t.Stride != 0 {
			continue // stacked experts: placed per expert, never moved
		}
		r, err := move(Range{Buffer: t.Buffer, Offset: t.Offset, Size: 1})
		if err != nil {
			return fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		t.Buffer, t.Offset = r.Buffer, r.Offset
	}
	ranges := func(rs []Range, where string) ([]Range, error) {
		out := make([]Range, len(rs))
		for i, r := range rs {
			var err error
			if out[i], err = move(r); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
		}
		return out, nil
	}
	dispatches := append([]Dispatch(nil), g.Dispatches...)
	for i := range dispatches {
		d := &dispatches[i]
		where := fmt.Sprintf("dispatch %d (%s)", i, d.Kernel)
		args := append([]Binding(nil), d.Args...)
		for j := range args {
			r, err := move(args[j].Range)
			if err != nil {
				return fmt.Errorf("%s, binding %s: %w", where, args[j].Name, err)
			}
			args[j].Range = r
		}
		reads, err := ranges(d.Reads, where+" reads")
		if err != nil {
			return err
		}
		writes, err := ranges(d.Writes, where+" writes")
		if err != nil {
			return err
		}
		d.Args, d.Reads, d.Writes = args, reads, writes
	}
	hosts := append([]HostPoint(nil), g.HostPoints...)
	for i := range hosts {
		rs, err := ranges(hosts[i].Reads, fmt.Sprintf("host point of layer %d", hosts[i].Layer))
		if err != nil {
			return err
		}
		if len(rs) > 0 {
			hosts[i].Reads = rs
		}
	}
	outputs, err := ranges(g.Outputs, "outputs")
	if err != nil {
		return err
	}
	g.Tensors, g.Dispatches, g.HostPoints, g.Outputs = tensors, dispatches, hosts, outputs
	g.Buffers = append(append([]Buffer(nil), g.Buffers...), add...)
	if g.ICB != nil {
		g.ICB = PlanICB(g)
	}
	return nil
}
