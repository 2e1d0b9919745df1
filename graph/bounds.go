package graph

// barrierLevels gives each dispatch the earliest barrier group it could join
// in any order that keeps its hazards and keeps every dispatch between the
// same host signals (and, with atWaits, on the same side of each host wait
// too): a hazard pushes a dispatch one group past its predecessor, and a
// segment cannot start in a group before the last group of the segments
// ahead of it (the groups may be shared). The largest level is the fewest
// barriers any such order needs.
func barrierLevels(g *Graph, preds [][]int, atWaits bool) []int {
	cuts := map[int]bool{} // a new segment starts at these dispatches
	for _, h := range g.HostPoints {
		cuts[h.After+1] = true
		if atWaits && h.Wait > 0 {
			cuts[h.Wait] = true
		}
	}
	level := make([]int, len(g.Dispatches))
	floor, running := 0, 0
	for i := range g.Dispatches {
		if cuts[i] {
			floor = running
		}
		lv := floor
		for _, p := range preds[i] {
			lv = max(lv, level[p]+1)
		}
		level[i] = lv
		running = max(running, lv)
	}
	return level
}

// LowerBound is the fewest barriers any order of g's dispatches needs while
// keeping every hazard and every host point: the dependency depth of the
// window, segment by segment.
func LowerBound(g *Graph) int {
	bound := 0
	for _, lv := range barrierLevels(g, Dependencies(g.Dispatches), false) {
		bound = max(bound, lv)
	}
	return bound
}

// chainLengths is, for each dispatch, the most dispatches on a dependency
// chain ending at it, counting only predecessors that keep(p) accepts.
func chainLengths(preds [][]int, keep func(p int) bool) []int {
	length := make([]int, len(preds))
	for i, ps := range preds {
		length[i] = 1
		for _, p := range ps {
			if keep(p) {
				length[i] = max(length[i], length[p]+1)
			}
		}
	}
	return length
}
