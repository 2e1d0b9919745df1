package engine_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// A streamed prompt of five windows prefilled layer by layer, all five in
// one group, in groups of two and one at a time (the bound on what a
// group carries), gives the logits of the window-major prefill bit for bit
// (tiny-go: GDN, QSA and PLE layers, 256 experts through an arena of 40),
// also with each barrier group's dispatches shuffled or concurrent, and
// reads fewer experts in larger groups.
func TestLayerMajorGroups(t *testing.T) {
	open := func(windowMajor bool) *load.Loaded {
		l, err := load.HF(e2e.TinyGoDir(), e2e.WithGenerator(load.Options{AllLogits: true, ArenaExperts: 40, History: "-", WindowMajor: windowMajor}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	V := 0
	run := func(l *load.Loaded) ([]int, [][]float32, int64) {
		var prompt []int
		V = l.Config.Architecture.VocabSize
		n := 37 // five windows
		if raceEnabled {
			n = 17 // three
		}
		for i := range n {
			prompt = append(prompt, (i*7+3)%V)
		}
		var rows [][]float32
		before := l.Model.StreamStats()
		out, err := l.Model.NewSession().Generate(prompt, 3, engine.GenerateOptions{PrefillRows: 8, IgnoreEOS: true,
			OnLogits: func(r []float32) error { rows = append(rows, slices.Clone(r)); return nil }})
		if err != nil {
			t.Fatal(err)
		}
		return out, rows, l.Model.StreamStats().Sub(before).BytesRead
	}
	wantT, wantL, wmRead := run(open(true))
	var reads []int64
	bounds := []int64{0, 1536 << 10, 1} // all five windows in one group, two, one
	if raceEnabled {
		bounds = bounds[:1] // three windows in one group
	}
	for _, bound := range bounds {
		t.Run(fmt.Sprint(bound), func(t *testing.T) {
			if bound > 0 {
				defer engine.SetMaxCarried(bound)()
			}
			gotT, gotL, read := run(open(false))
			e2e.SameRun(t, fmt.Sprintf("groups carrying at most %d bytes", bound), gotT, wantT, gotL, wantL)
			t.Logf("%d bytes read (window-major %d)", read, wmRead)
			reads = append(reads, read)
		})
	}
	// The cpu backend runs a barrier group a router cuts in two segments:
	// its dispatches in any order or concurrently give the same logits.
	orders := []backend.Order{backend.Shuffled, backend.Concurrent}
	if raceEnabled {
		orders = orders[1:]
	}
	for _, o := range orders {
		l := open(false)
		if !l.Model.SetOrder(o, 5) {
			t.Fatal("the cpu backend's programs take no order")
		}
		gotT, gotL, _ := run(l)
		e2e.SameRun(t, fmt.Sprintf("layer-major, order %d", o), gotT, wantT, gotL, wantL)
	}
	if len(reads) == 3 && !(reads[0] < reads[2] && reads[0] < wmRead) {
		t.Errorf("bytes read: one group %d, one window a group %d, window-major %d", reads[0], reads[2], wmRead)
	}
}
