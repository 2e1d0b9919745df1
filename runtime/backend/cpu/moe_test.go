package cpu

import (
	"slices"
	"testing"
)

// TestGroupByExpert: pairs grouped by expert in expert order, each group's
// pairs in window order, ids past the layer's experts left out.
func TestGroupByExpert(t *testing.T) {
	ids := []uint32{5, 2, 9, 2, 5, 7, 100, 2}
	got := groupByExpert(ids, 10, nil)
	want := []expertGroup{{2, []int{1, 3, 7}}, {5, []int{0, 4}}, {7, []int{5}}, {9, []int{2}}}
	if len(got) != len(want) {
		t.Fatalf("groups %v, want %v", got, want)
	}
	for i := range want {
		if got[i].e != want[i].e || !slices.Equal(got[i].tjs, want[i].tjs) {
			t.Errorf("group %d: %v, want %v", i, got[i], want[i])
		}
	}
	if g := groupByExpert(nil, 10, got); len(g) != 0 {
		t.Errorf("no ids: %v", g)
	}
}
