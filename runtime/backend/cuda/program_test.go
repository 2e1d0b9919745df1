package cuda

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
)

// TestPlaceHostPoints: a host point signals right after its router and the
// GPU waits for it before its Wait (right after the signal when the passes
// placed none); replay stretches are cut at both, and at the window's end.
func TestPlaceHostPoints(t *testing.T) {
	p := &Program{steps: make([]step, 10), hosts: []graph.HostPoint{{Layer: 0, After: 2, Wait: 5}, {Layer: 1, After: 6}}}
	if err := p.placeHostPoints(); err != nil {
		t.Fatal(err)
	}
	if p.signalAt[3] != 0 || p.waitAt[5] != 0 || p.signalAt[7] != 1 || p.waitAt[7] != 1 {
		t.Fatalf("signals %v, waits %v", p.signalAt, p.waitAt)
	}
	if want := []int{3, 5, 7, 10}; !slices.Equal(p.cuts, want) {
		t.Fatalf("cuts %v, want %v", p.cuts, want)
	}
	bad := &Program{steps: make([]step, 10), hosts: []graph.HostPoint{{After: 2, Wait: 5}, {After: 3, Wait: 5}}}
	if err := bad.placeHostPoints(); err == nil {
		t.Fatal("two host points waiting at one dispatch were accepted")
	}
}

// TestConstantsRendering: a pipeline's constants become macros, a required
// one it does not set is poisoned, an optional one it does not set is
// marked undefined (its default applies), bools render as C++ bools, and a
// value that does not fit its type is refused.
func TestConstantsRendering(t *testing.T) {
	m := &artifact.Artifact{Name: "m", Constants: []artifact.FunctionConstant{
		{Index: 0, Name: "grid_offset_x", Type: artifact.UInt, Optional: true},
		{Index: 100, Family: "embed", Name: "rows", Type: artifact.UInt},
		{Index: 101, Family: "embed", Name: "dim", Type: artifact.UInt},
		{Index: 102, Family: "embed", Name: "flag", Type: artifact.Bool},
	}}
	var b bytes.Buffer
	if err := writeConstants(&b, m, map[int]int64{100: 7, 102: 1}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"#define __STRATA_FC_0 0xdeadbeefu\n#define __STRATA_FCDEF_fc_grid_offset_x 0\n",
		"#define __STRATA_FC_100 7u\n#define __STRATA_FCDEF_fc_embed_rows 1\n",
		"#define __STRATA_FC_101 0xdeadbeefu\n#define __STRATA_FCDEF_fc_embed_dim 0\n",
		"#define __STRATA_FC_102 true\n",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
	if err := writeConstants(&bytes.Buffer{}, m, map[int]int64{100: 1 << 32}); err == nil {
		t.Error("2^32 accepted for a uint")
	}
	if err := writeConstants(&bytes.Buffer{}, m, map[int]int64{102: 2}); err == nil {
		t.Error("2 accepted for a bool")
	}
}
