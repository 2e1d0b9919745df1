package graph

import (
	"slices"
	"testing"
)

// TestBarrierRule checks the simple rule on hand-made dispatches: RAW, WAR and
// WAW need a barrier, read-after-read and disjoint ranges do not.
func TestBarrierRule(t *testing.T) {
	r := func(off, size int64) Range { return Range{Buffer: "act", Offset: off, Size: size} }
	d := func(reads, writes []Range) Dispatch { return Dispatch{Reads: reads, Writes: writes} }
	cases := []struct {
		name string
		ds   []Dispatch
		want []bool
	}{
		{"read after write", []Dispatch{d(nil, []Range{r(0, 8)}), d([]Range{r(4, 8)}, nil)}, []bool{false, true}},
		{"write after read", []Dispatch{d([]Range{r(0, 8)}, nil), d(nil, []Range{r(7, 1)})}, []bool{false, true}},
		{"write after write", []Dispatch{d(nil, []Range{r(0, 8)}), d(nil, []Range{r(0, 8)})}, []bool{false, true}},
		{"read after read", []Dispatch{d([]Range{r(0, 8)}, nil), d([]Range{r(0, 8)}, nil)}, []bool{false, false}},
		{"adjacent ranges", []Dispatch{d(nil, []Range{r(0, 8)}), d([]Range{r(8, 8)}, []Range{r(16, 8)})}, []bool{false, false}},
		{"other buffer", []Dispatch{d(nil, []Range{r(0, 8)}), d([]Range{{Buffer: "state", Size: 8}}, nil)}, []bool{false, false}},
		{"reset after a barrier", []Dispatch{
			d(nil, []Range{r(0, 8)}), d([]Range{r(0, 8)}, []Range{r(8, 8)}), d([]Range{r(0, 8)}, nil),
		}, []bool{false, true, false}},
	}
	for _, c := range cases {
		n := PlaceBarriers(c.ds)
		var got []bool
		placed := 0
		for _, x := range c.ds {
			got = append(got, x.Barrier)
			if x.Barrier {
				placed++
			}
		}
		if !slices.Equal(got, c.want) || n != placed {
			t.Errorf("%s: barriers %v (count %d), want %v", c.name, got, n, c.want)
		}
	}
}
