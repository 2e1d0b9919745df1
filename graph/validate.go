package graph

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
)

// writable are the buffer kinds a dispatch may write. The others are filled
// by the host (weights, experts, smap, residency, params) or are memory the
// loader maps read-only.
var writable = map[string]bool{KindScratch: true, KindState: true, KindCache: true, KindCarry: true}

// kinds are the buffer kinds a graph may declare.
var kinds = map[string]bool{
	KindWeights: true, KindExperts: true, KindState: true, KindScratch: true, KindParams: true, KindCache: true,
	KindSmap: true, KindResidency: true, KindCarry: true, KindMapped: true,
}

// Validate checks a finished window graph, one Optimize made or one read back
// from an artifact, before any backend runs it: what Check checks, and that
// every buffer has a known kind, every dispatch keeps the hardware guards,
// has its grid chunked, binds exactly the ranges it declares (reads and
// writes) with a valid access and writes only buffers dispatches may write,
// that every scratch byte a dispatch reads was written by a dispatch of an
// earlier barrier group (scratch holds whatever the last window left, so a
// read of unwritten scratch is garbage, and in an index buffer an index out
// of range), that every hazard is separated by a barrier or a host wait, and
// that the ICB plan is the one the graph implies. Errors name the graph and
// the dispatch (index and kernel).
func (g *Graph) Validate() error {
	if err := g.Check(); err != nil {
		return err
	}
	name := fmt.Sprintf("graph %s/T=%d", g.Model, g.Rows)
	if g.Kind != KindTrunk && g.Kind != KindMTP {
		return fmt.Errorf("%s: kind %q, expected %q or %q", name, g.Kind, KindTrunk, KindMTP)
	}
	if g.Rows < 1 || g.LogitRows < 1 || g.LogitRows > g.Rows {
		return fmt.Errorf("%s: %d rows and %d logit rows, expected 1 ≤ logit rows ≤ rows", name, g.Rows, g.LogitRows)
	}
	kindOf := make(map[string]string, len(g.Buffers))
	for _, b := range g.Buffers {
		if !kinds[b.Kind] {
			return fmt.Errorf("%s: buffer %q has kind %q", name, b.Name, b.Kind)
		}
		if b.Size < 0 {
			return fmt.Errorf("%s: buffer %q has size %d", name, b.Name, b.Size)
		}
		kindOf[b.Name] = b.Kind
	}
	if err := CheckGuards(g.Dispatches, DefaultLimits); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	for i := range g.Dispatches {
		if err := checkBindings(&g.Dispatches[i], kindOf); err != nil {
			return fmt.Errorf("%s: dispatch %d (%s): %w", name, i, g.Dispatches[i].Kernel, err)
		}
	}
	for k, h := range g.HostPoints {
		if h.Wait <= h.After {
			return fmt.Errorf("%s: host point %d (layer %d) has no wait placed after dispatch %d", name, k, h.Layer, h.After)
		}
		for _, r := range h.Reads {
			if _, ok := kindOf[r.Buffer]; !ok || r.Offset < 0 || r.Size < 0 || r.End() > bufferSize(g, r.Buffer) {
				return fmt.Errorf("%s: host point %d reads [%d,%d) of buffer %q, outside it", name, k, r.Offset, r.End(), r.Buffer)
			}
		}
	}
	if err := g.checkWrittenBeforeRead(kindOf); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if err := g.checkBarriers(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if g.ICB != nil && !reflect.DeepEqual(g.ICB, PlanICB(g)) {
		return fmt.Errorf("%s: its ICB plan is not the one its dispatches, barriers and host points imply", name)
	}
	return nil
}

func bufferSize(g *Graph, name string) int64 {
	b, _ := g.Buffer(name)
	return b.Size
}

// checkBindings requires a dispatch's grid chunked to the limit, its bindings
// to have a valid access, and its reads and writes to be exactly the ranges
// it binds for reading and for writing: the hazard analysis orders the
// dispatches by the declared ranges, the kernels touch the bound ones.
func checkBindings(d *Dispatch, kindOf map[string]string) error {
	if n := gridSize(d.Grid); n > DefaultLimits.MaxThreadgroupsPerGrid {
		return fmt.Errorf("grid %v of %d threadgroups, more than the %d a dispatch may have", d.Grid, n, DefaultLimits.MaxThreadgroupsPerGrid)
	}
	var reads, writes []Range
	for _, b := range d.Args {
		switch b.Access {
		case Read:
			reads = append(reads, b.Range)
		case Write:
			writes = append(writes, b.Range)
		case ReadWrite:
			reads = append(reads, b.Range)
			writes = append(writes, b.Range)
		default:
			return fmt.Errorf("binding %s has access %q, expected %q, %q or %q", b.Name, b.Access, Read, Write, ReadWrite)
		}
		if b.Access != Read && !writable[kindOf[b.Buffer]] {
			return fmt.Errorf("binding %s writes buffer %q of kind %s, which dispatches only read", b.Name, b.Buffer, kindOf[b.Buffer])
		}
	}
	if !sameRanges(reads, d.Reads) {
		return fmt.Errorf("declares reads %v, its read bindings are %v", d.Reads, reads)
	}
	if !sameRanges(writes, d.Writes) {
		return fmt.Errorf("declares writes %v, its write bindings are %v", d.Writes, writes)
	}
	return nil
}

// sameRanges reports whether a and b hold the same ranges, in any order.
func sameRanges(a, b []Range) bool {
	if len(a) != len(b) {
		return false
	}
	if slices.Equal(a, b) { // the generator declares them in binding order
		return true
	}
	less := func(x, y Range) int {
		if x.Buffer != y.Buffer {
			if x.Buffer < y.Buffer {
				return -1
			}
			return 1
		}
		if x.Offset != y.Offset {
			return int(min(max(x.Offset-y.Offset, -1), 1))
		}
		return int(min(max(x.Size-y.Size, -1), 1))
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, less)
	slices.SortFunc(b, less)
	return slices.Equal(a, b)
}

// intervals is a sorted list of disjoint, non-adjacent half-open byte ranges.
type intervals [][2]int64

// add merges [lo, hi) in.
func (s intervals) add(lo, hi int64) intervals {
	if lo >= hi {
		return s
	}
	i := sort.Search(len(s), func(i int) bool { return s[i][1] >= lo }) // first that touches or follows
	j := i
	for j < len(s) && s[j][0] <= hi {
		lo, hi = min(lo, s[j][0]), max(hi, s[j][1])
		j++
	}
	return slices.Replace(s, i, j, [2]int64{lo, hi})
}

// covers reports whether [lo, hi) lies inside one interval (merged intervals
// leave no gap a covered range could span) and, if not, the first byte that
// is not covered.
func (s intervals) covers(lo, hi int64) (bool, int64) {
	if lo >= hi {
		return true, 0
	}
	i := sort.Search(len(s), func(i int) bool { return s[i][1] > lo })
	if i == len(s) || s[i][0] > lo {
		return false, lo
	}
	if s[i][1] < hi {
		return false, s[i][1]
	}
	return true, 0
}

// checkWrittenBeforeRead requires every scratch byte a dispatch reads to be
// written by a dispatch of an earlier barrier group. The other kinds hold
// what the host wrote (weights, params, smap) or what earlier windows left
// on purpose (state, caches, carry).
func (g *Graph) checkWrittenBeforeRead(kindOf map[string]string) error {
	done := map[string]intervals{}    // written by earlier barrier groups
	pending := map[string]intervals{} // written by the current group
	for i := range g.Dispatches {
		d := &g.Dispatches[i]
		if d.Barrier {
			for buf, s := range pending {
				for _, iv := range s {
					done[buf] = done[buf].add(iv[0], iv[1])
				}
			}
			clear(pending)
		}
		for _, r := range d.Reads {
			if kindOf[r.Buffer] != KindScratch {
				continue
			}
			if ok, at := done[r.Buffer].covers(r.Offset, r.End()); !ok {
				what := "no earlier dispatch writes it"
				if ok, _ := pending[r.Buffer].covers(at, at+1); ok {
					what = "only a dispatch of its own barrier group writes it"
				}
				return fmt.Errorf("dispatch %d (%s) reads [%d,%d) of scratch buffer %q, but byte %d is unwritten there: %s", i, d.Kernel, r.Offset, r.End(), r.Buffer, at, what)
			}
		}
		for _, w := range d.Writes {
			if kindOf[w.Buffer] == KindScratch {
				pending[w.Buffer] = pending[w.Buffer].add(w.Offset, w.End())
			}
		}
	}
	return nil
}

// checkBarriers requires every hazard between two dispatches to cross a
// barrier, and every dispatch that depends on what the host does at a host
// point (the experts it makes resident) to come at or after its wait.
func (g *Graph) checkBarriers() error {
	n := len(g.Dispatches)
	group := make([]int, n)
	for i := 1; i < n; i++ {
		group[i] = group[i-1]
		if g.Dispatches[i].Barrier {
			group[i]++
		}
	}
	for i, preds := range windowDeps(g)[:n] {
		for _, p := range preds {
			if int(p) >= n {
				h := g.HostPoints[int(p)-n]
				if i < h.Wait {
					return fmt.Errorf("dispatch %d (%s) depends on host point %d (layer %d) but runs before its wait at dispatch %d", i, g.Dispatches[i].Kernel, int(p)-n, h.Layer, h.Wait)
				}
				continue
			}
			if group[p] == group[i] {
				return fmt.Errorf("dispatch %d (%s) and dispatch %d (%s) touch the same bytes (one writes them) with no barrier between them", p, g.Dispatches[p].Kernel, i, g.Dispatches[i].Kernel)
			}
		}
	}
	return nil
}
