package load_test

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/sysmem"
)

// Any arena that holds one row's experts serves any prompt: tiny-k512
// (top-10 of 512) asked for 16-row prefill windows through an arena of 102
// slots (which cannot hold 16 rows' experts of one layer) and of 10 (one
// row's) runs windows of at most slots/10 rows (the largest shape its
// artifact has: 4 and 1 rows), and decodes the tokens and logits of
// the resident model in those windows bit for bit; against the resident
// model's 16-row windows the tokens are the same and the logits within
// float32 reassociation (the cpu kernels take prefill rows four at a time,
// so a row's sums depend on the window it is in). An arena of 9 is refused
// naming the minimum.
func TestArenaServesAnyPrompt(t *testing.T) {
	ref := e2e.Ref(t, "tiny-k512")
	prompt := ref.Tokens[:16]
	resident16, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{AllLogits: true, PrefillRows: 16})
	wide, wideL := e2e.DecodeAll(t, resident16, prompt, 6)
	for _, slots := range []int{102, 10} {
		rows := min(slots/10, 4) // decode shapes 1…4, prefill 16
		resident, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{AllLogits: true, PrefillRows: rows})
		wantT, wantL := e2e.DecodeAll(t, resident, prompt, 6)
		var notes []string
		l, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{AllLogits: true, PrefillRows: 16, ArenaExperts: slots, History: "-",
			Note: func(s string) { notes = append(notes, s) }})
		gotT, gotL := e2e.DecodeAll(t, l, prompt, 6)
		e2e.SameRun(t, "arena of "+strconv.Itoa(slots), gotT, wantT, gotL, wantL)
		if !slices.Equal(gotT, wide) {
			t.Errorf("arena of %d: tokens %v, 16-row resident windows %v", slots, gotT, wide)
		}
		for i := range gotL {
			if e := e2e.RelL2(gotL[i], wideL[i]); e > 1e-5 {
				t.Errorf("arena of %d: row %d off the 16-row resident windows by %.2g relative L2", slots, i, e)
			}
		}
		if want := strconv.Itoa(slots/10) + " rows"; len(notes) != 1 || !strings.Contains(notes[0], want) || l.PrefillRows != rows {
			t.Errorf("arena of %d: prefill rows %d, notes %q; want %d and windows of at most %s", slots, l.PrefillRows, notes, rows, want)
		}
	}
	_, err := load.HF("../../testdata/oracles/tiny-k512", e2e.WithGenerator(load.Options{PrefillRows: 16, ArenaExperts: 9, History: "-"}))
	if err == nil || !strings.Contains(err.Error(), "give it at least 10") {
		t.Errorf("arena of 9 slots: err %v; want the minimum, 10, named", err)
	}
}

// The default arena comes from the machine's memory: on a machine whose
// available memory holds the other buffers, the margin and 100 experts,
// the arena gets 100 slots (and the tokens do not change); with room for
// every expert, none is streamed.
func TestAutoArena(t *testing.T) {
	defer func(f func() (sysmem.Info, error)) { *load.ReadMemory = f }(*load.ReadMemory)
	ref := e2e.Ref(t, "tiny-k512")
	resident, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{AllLogits: true, PrefillRows: 4})
	wantT, wantL := e2e.DecodeAll(t, resident, ref.Tokens[:12], 4)

	slotBytes, all, other := expertSizes(t)
	for _, c := range []struct {
		room, want int // experts the available memory holds beyond the rest; slots expected
	}{{100, 100}, {all + 5, 0}} {
		*load.ReadMemory = func() (sysmem.Info, error) {
			return sysmem.Info{Total: 1 << 30, Available: uint64(other + 1<<30 + int64(c.room)*slotBytes), Source: "test"}, nil
		}
		var note string
		l, _ := e2e.OpenOracle(t, "tiny-k512", load.Options{AllLogits: true, PrefillRows: 4, AutoArena: true, History: "-", Note: func(s string) { note = s }})
		if l.ArenaExperts != c.want {
			t.Errorf("room for %d experts: arena of %d, want %d (%s)", c.room, l.ArenaExperts, c.want, note)
		}
		gotT, gotL := e2e.DecodeAll(t, l, ref.Tokens[:12], 4)
		e2e.SameRun(t, "automatic arena", gotT, wantT, gotL, wantL)
	}
}
