package graph

import (
	"slices"
	"sort"
)

// access is what one node of the hazard analysis reads and writes: a dispatch,
// or a host point acting as a pseudo-dispatch.
type access struct {
	reads, writes []Range
}

// span is a stretch of bytes of one buffer with one history: the node that
// last wrote it and the nodes that read it since.
type span struct {
	lo, hi  int64
	writer  int32 // -1: never written
	readers []int32
}

// byteHistory keeps the spans of one buffer sorted and disjoint. Only bytes
// that were touched have spans; a range splits the spans at its ends, so the
// number of spans stays near the number of distinct region boundaries.
type byteHistory struct {
	spans []span
}

// cover makes the spans tile [lo, hi) exactly, splitting at lo and hi and
// filling gaps, and returns the index range of the tiling spans.
func (h *byteHistory) cover(lo, hi int64) (int, int) {
	first := sort.Search(len(h.spans), func(i int) bool { return h.spans[i].hi > lo })
	last := first
	for last < len(h.spans) && h.spans[last].lo < hi {
		last++
	}
	// Fast path: an existing span already matches exactly.
	if last == first+1 && h.spans[first].lo == lo && h.spans[first].hi == hi {
		return first, last
	}
	var tiles []span
	at := lo
	for i := first; i < last; i++ {
		s := h.spans[i]
		if s.lo < lo { // the part before lo keeps its history
			tiles = append(tiles, span{lo: s.lo, hi: lo, writer: s.writer, readers: slices.Clone(s.readers)})
		}
		if at < s.lo { // an untouched gap
			tiles = append(tiles, span{lo: at, hi: s.lo, writer: -1})
		}
		mid := span{lo: max(s.lo, lo), hi: min(s.hi, hi), writer: s.writer, readers: slices.Clone(s.readers)}
		tiles = append(tiles, mid)
		at = mid.hi
		if s.hi > hi {
			tiles = append(tiles, span{lo: hi, hi: s.hi, writer: s.writer, readers: slices.Clone(s.readers)})
		}
	}
	if at < hi {
		tiles = append(tiles, span{lo: at, hi: hi, writer: -1})
	}
	// The tiles of [lo, hi) start after any leading piece kept from a split.
	start := first
	for _, t := range tiles {
		if t.lo >= lo {
			break
		}
		start++
	}
	h.spans = slices.Replace(h.spans, first, last, tiles...)
	n := 0
	for _, t := range tiles {
		if t.lo >= lo && t.hi <= hi {
			n++
		}
	}
	return start, start + n
}

// hazardPreds returns, for every node, the earlier nodes it has a hazard with
// (read after write, write after read, write after write; read after read is
// free), visiting nodes in the order seq. Each edge is a real byte overlap,
// and every hazardous pair is connected by a path of edges: a reader links
// only to the last writer of each byte and a writer to the readers since that
// write, so the edge count stays linear in the number of ranges rather than
// quadratic in dispatches. Buffers nobody writes are not tracked at all.
func hazardPreds(seq []int, acc []access) [][]int32 {
	written := map[string]bool{}
	for _, a := range acc {
		for _, w := range a.writes {
			if w.Size > 0 {
				written[w.Buffer] = true
			}
		}
	}
	hist := map[string]*byteHistory{}
	history := func(buf string) *byteHistory {
		h := hist[buf]
		if h == nil {
			h = &byteHistory{}
			hist[buf] = h
		}
		return h
	}
	preds := make([][]int32, len(acc))
	var found []int32
	for _, v := range seq {
		a := acc[v]
		self := int32(v)
		found = found[:0]
		for _, r := range a.reads {
			if r.Size <= 0 || !written[r.Buffer] {
				continue
			}
			h := history(r.Buffer)
			i, j := h.cover(r.Offset, r.End())
			for k := i; k < j; k++ {
				if w := h.spans[k].writer; w >= 0 && w != self {
					found = append(found, w)
				}
			}
		}
		for _, w := range a.writes {
			if w.Size <= 0 {
				continue
			}
			h := history(w.Buffer)
			i, j := h.cover(w.Offset, w.End())
			for k := i; k < j; k++ {
				s := &h.spans[k]
				if s.writer >= 0 && s.writer != self {
					found = append(found, s.writer)
				}
				for _, r := range s.readers {
					if r != self {
						found = append(found, r)
					}
				}
			}
		}
		if len(found) > 0 {
			slices.Sort(found)
			preds[v] = slices.Clone(slices.Compact(found))
		}
		// Record v only after collecting its edges, so it never links to itself.
		for _, r := range a.reads {
			if r.Size <= 0 || !written[r.Buffer] {
				continue
			}
			h := history(r.Buffer)
			i, j := h.cover(r.Offset, r.End())
			for k := i; k < j; k++ {
				s := &h.spans[k]
				if n := len(s.readers); n == 0 || s.readers[n-1] != self {
					s.readers = append(s.readers, self)
				}
			}
		}
		for _, w := range a.writes {
			if w.Size <= 0 {
				continue
			}
			h := history(w.Buffer)
			i, j := h.cover(w.Offset, w.End())
			for k := i; k < j; k++ {
				h.spans[k].writer = self
				h.spans[k].readers = nil
			}
		}
	}
	return preds
}

// Dependencies is the hazard graph of a dispatch list in its current order:
// for each dispatch, the earlier dispatches it must follow, ascending. Every
// edge is a RAW, WAR or WAW overlap on some byte, and every such pair of
// dispatches is connected by a path, so any order that keeps the edges keeps
// every hazard.
func Dependencies(ds []Dispatch) [][]int {
	acc := make([]access, len(ds))
	seq := make([]int, len(ds))
	for i := range ds {
		acc[i] = access{reads: ds[i].Reads, writes: ds[i].Writes}
		seq[i] = i
	}
	preds := hazardPreds(seq, acc)
	out := make([][]int, len(ds))
	for i, ps := range preds {
		for _, p := range ps {
			out[i] = append(out[i], int(p))
		}
	}
	return out
}

// hazard reports whether two accesses conflict: some byte written by one is
// read or written by the other.
func hazard(a, b access) bool {
	for _, w := range a.writes {
		if anyOverlap(w, b.reads) || anyOverlap(w, b.writes) {
			return true
		}
	}
	for _, w := range b.writes {
		if anyOverlap(w, a.reads) {
			return true
		}
	}
	return false
}
