package graph

// PlaceBarriers sets the Barrier flag of every dispatch by the simple rule: a
// dispatch needs a barrier iff it reads a range written, or writes a range read
// or written, since the last barrier. Read-after-read is free. The first
// dispatch never needs one. It returns the number of barriers placed.
func PlaceBarriers(ds []Dispatch) int {
	var read, written []Range
	n := 0
	for i := range ds {
		d := &ds[i]
		d.Barrier = i > 0 && conflicts(d, read, written)
		if d.Barrier {
			n++
			read, written = read[:0], written[:0]
		}
		read = append(read, d.Reads...)
		written = append(written, d.Writes...)
	}
	return n
}

// conflicts reports a RAW, WAR or WAW hazard of d against the ranges touched
// since the last barrier.
func conflicts(d *Dispatch, read, written []Range) bool {
	for _, r := range d.Reads {
		if anyOverlap(r, written) {
			return true
		}
	}
	for _, w := range d.Writes {
		if anyOverlap(w, written) || anyOverlap(w, read) {
			return true
		}
	}
	return false
}

func anyOverlap(r Range, set []Range) bool {
	for _, o := range set {
		if r.Overlaps(o) {
			return true
		}
	}
	return false
}
