package graph

import (
	"fmt"
	"slices"
)

// hostAccess is what a host point does, seen as a pseudo-dispatch: it reads
// what the router wrote (the chosen experts) and rewrites every experts buffer
// and smap (with a streaming arena, any slot may be refilled and remapped). So
// a dispatch that reads experts after the host point depends on it, and one
// that reads experts before it must finish before the signal. (Kernels bind
// the arena as a whole buffer sized at run time; the smap range they read is
// what carries the dependency.)
func hostAccess(g *Graph, router int, extra []Range) access {
	a := access{reads: append(append([]Range(nil), g.Dispatches[router].Writes...), extra...)}
	for _, b := range g.Buffers {
		if (b.Kind == KindExperts || b.Kind == KindSmap) && b.Size > 0 {
			a.writes = append(a.writes, Range{Buffer: b.Name, Offset: 0, Size: b.Size})
		}
	}
	return a
}

// windowDeps is the hazard graph of a window with its host points as extra
// nodes: dispatch i is node i, host point k is node len(Dispatches)+k, placed
// right after its router in the visiting order. Each host point also depends
// on its router directly, even when the router wrote nothing it reads.
func windowDeps(g *Graph) [][]int32 {
	n := len(g.Dispatches)
	acc := make([]access, n+len(g.HostPoints))
	seq := make([]int, 0, len(acc))
	k := 0
	for i := range g.Dispatches {
		acc[i] = access{reads: g.Dispatches[i].Reads, writes: g.Dispatches[i].Writes}
		seq = append(seq, i)
		for k < len(g.HostPoints) && g.HostPoints[k].After == i {
			acc[n+k] = hostAccess(g, i, g.HostPoints[k].Reads)
			seq = append(seq, n+k)
			k++
		}
	}
	preds := hazardPreds(seq, acc)
	for k, h := range g.HostPoints {
		if !slices.Contains(preds[n+k], int32(h.After)) {
			preds[n+k] = append(preds[n+k], int32(h.After))
			slices.Sort(preds[n+k])
		}
	}
	return preds
}

// checkHostPoints requires host points strictly ascending and inside the
// dispatch list: reordering works segment by segment between them.
func (g *Graph) checkHostPoints() error {
	for i, h := range g.HostPoints {
		if h.After < 0 || h.After >= len(g.Dispatches) || (i > 0 && h.After <= g.HostPoints[i-1].After) {
			return fmt.Errorf("graph %s/T=%d: host point %d (layer %d) after dispatch %d is out of order or range", g.Model, g.Rows, i, h.Layer, h.After)
		}
	}
	return nil
}

// Reorder list-schedules the dispatches so that independent work shares a
// barrier group, moving a dispatch only past dispatches it has no hazard
// with, and updates the host points. The window is cut into segments at the
// host points; for each host point k the new order is
//
//	… pre-signal work, router(k) | signal | work independent of the host | wait | work that needs the host …
//
// where the pre-signal part is everything the router and the host depend on
// (router last, so After still names it), the gap between signal and wait
// holds whatever does not depend on the host (the shared expert) so it runs
// while the host makes experts resident, and the rest waits. Dispatches that
// neither the router nor the host need move past the signal into the gap,
// where they overlap the host's work too. Each part is scheduled by
// dependency level (as-soon-as-possible), ties by original index, so the
// output is deterministic. Barriers are not touched: call PlaceBarriers after.
func Reorder(g *Graph) error {
	if err := g.checkHostPoints(); err != nil {
		return err
	}
	n, hosts := len(g.Dispatches), len(g.HostPoints)
	preds := windowDeps(g)

	inPool := make([]bool, n)
	dependsOnHost := make([]bool, n)
	neededByHost := make([]bool, n)
	order := make([]int, 0, n)
	newHosts := slices.Clone(g.HostPoints)
	var pool []int
	next := 0
	for k := 0; k <= hosts; k++ {
		end := n - 1
		if k < hosts {
			end = g.HostPoints[k].After
		}
		for ; next <= end; next++ {
			pool = append(pool, next)
		}
		// Carried dispatches come from earlier segments, so ascending
		// original index is still a topological order of the pool.
		slices.Sort(pool)
		for _, v := range pool {
			inPool[v] = true
			dependsOnHost[v], neededByHost[v] = false, false
		}
		if k > 0 {
			prevHost := int32(n + k - 1)
			for _, v := range pool {
				for _, p := range preds[v] {
					if p == prevHost || (int(p) < n && inPool[p] && dependsOnHost[p]) {
						dependsOnHost[v] = true
						break
					}
				}
			}
		}
		router := -1
		if k < hosts {
			router = g.HostPoints[k].After
			for _, p := range preds[n+k] {
				if int(p) < n && inPool[p] {
					neededByHost[p] = true
				}
			}
			for i := len(pool) - 1; i >= 0; i-- {
				if v := pool[i]; neededByHost[v] {
					for _, p := range preds[v] {
						if int(p) < n && inPool[p] {
							neededByHost[p] = true
						}
					}
				}
			}
		}
		var gap, rest, carry []int
		for _, v := range pool {
			switch {
			case v == router:
			case k > 0 && !dependsOnHost[v]:
				gap = append(gap, v)
			case k == hosts || neededByHost[v]:
				rest = append(rest, v)
			default:
				carry = append(carry, v)
			}
		}
		for _, v := range pool {
			inPool[v] = false
		}
		order = appendByLevel(order, gap, preds, n)
		if k > 0 {
			newHosts[k-1].Wait = len(order)
		}
		order = appendByLevel(order, rest, preds, n)
		if router >= 0 {
			order = append(order, router)
			newHosts[k].After = len(order) - 1
		}
		pool = carry
	}

	ds := make([]Dispatch, n)
	for i, v := range order {
		ds[i] = g.Dispatches[v]
	}
	g.Dispatches = ds
	g.HostPoints = newHosts
	return nil
}

// appendByLevel appends part (ascending original indices, a topological
// order) grouped by dependency level inside the part: every dispatch of a
// level depends only on earlier levels or on work already scheduled, so one
// level is one barrier group. Ties keep the original order.
func appendByLevel(order, part []int, preds [][]int32, n int) []int {
	if len(part) == 0 {
		return order
	}
	level := make(map[int]int, len(part))
	for _, v := range part {
		level[v] = 0
	}
	for _, v := range part {
		lv := 0
		for _, p := range preds[v] {
			if int(p) < n {
				if pl, ok := level[int(p)]; ok && pl+1 > lv {
					lv = pl + 1
				}
			}
		}
		level[v] = lv
	}
	sorted := slices.Clone(part)
	slices.SortStableFunc(sorted, func(a, b int) int { return level[a] - level[b] })
	return append(order, sorted...)
}
