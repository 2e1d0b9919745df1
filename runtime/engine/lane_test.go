package engine_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// roundRobin hands the model to each running generation in turn, one turn
// (a prefill window or a decode step) at a time, and logs whose turn ran.
type roundRobin struct {
	mu     sync.Mutex
	cond   *sync.Cond
	turn   int
	active []bool
	log    []int
}

func newRoundRobin(n int) *roundRobin {
	r := &roundRobin{active: make([]bool, n)}
	for i := range r.active {
		r.active[i] = true
	}
	r.cond = sync.NewCond(&r.mu)
	return r
}

// pass gives the turn to the next active generation after i (i itself
// when it is the only one left).
func (r *roundRobin) pass(i int) {
	for k := 1; k <= len(r.active); k++ {
		if j := (i + k) % len(r.active); r.active[j] {
			r.turn = j
			break
		}
	}
	r.cond.Broadcast()
}

func (r *roundRobin) wait(i int) {
	for r.turn != i {
		r.cond.Wait()
	}
	r.log = append(r.log, i)
}

// run runs gen(i) for every i at once, each starting in its turn.
func (r *roundRobin) run(gen func(i int, turn func(int) error)) {
	var wg sync.WaitGroup
	for i := range r.active {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.mu.Lock()
			r.wait(i)
			r.mu.Unlock()
			gen(i, func(int) error {
				r.mu.Lock()
				defer r.mu.Unlock()
				r.pass(i)
				r.wait(i)
				return nil
			})
			r.mu.Lock()
			r.active[i] = false
			r.pass(i)
			r.mu.Unlock()
		}()
	}
	wg.Wait()
}

// switches counts the turns that ran another generation than the one
// before.
func switches(log []int) int {
	n := 0
	for i := 1; i < len(log); i++ {
		if log[i] != log[i-1] {
			n++
		}
	}
	return n
}

// TestLanesInterleaved: two prompts generated at once on two lanes of one
// model, taking turns window by window, give each the tokens and the logits
// (bit for bit) it gets alone, with speculation off and on (suffix drafts,
// the MTP head), whether the lanes have buffers of their own (the cpu
// backend forks its memory) or swap the state through the model's
// (CopyLanes: what the other backends do). tiny-go: GDN, QSA, PLE and an
// MTP head, its experts resident or streamed through an arena of 40 (of
// 256) that both sessions share; q4-a with an MTP head.
func TestLanesInterleaved(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dir   func(t *testing.T) string
		arena int // routed experts streamed through an arena of this many
	}{
		{"tiny-go", func(*testing.T) string { return e2e.TinyGoDir() }, 0},
		{"tiny-go-streamed", func(*testing.T) string { return e2e.TinyGoDir() }, 40},
		{"q4-a-mtp", func(t *testing.T) string { return e2e.WithMTP(t) }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := load.HF(tc.dir(t), e2e.WithGenerator(load.Options{AllLogits: true, ArenaExperts: tc.arena, History: "-"}))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if !l.Model.HasMTP() {
				t.Fatal("the model has no MTP head")
			}
			V := l.Config.Architecture.VocabSize
			var prompts [2][]int
			long, short, n, minSwitches := 37, 11, 24, 10
			if raceEnabled {
				long, short, n, minSwitches = 13, 6, 8, 6 // still several windows each, interleaved
			}
			for i := range long {
				prompts[0] = append(prompts[0], (i*7+3)%V)
			}
			for i := range short {
				prompts[1] = append(prompts[1], (i*13+5)%V)
			}
			prompts[1] = append(prompts[1], prompts[1]...) // repeats: suffix drafts hit
			gen := func(s *engine.Session, prompt []int, sp engine.SpecOptions, turn func(int) error) ([]int, [][]float32) {
				var rows [][]float32
				out, err := s.Generate(prompt, n, engine.GenerateOptions{PrefillRows: 8, IgnoreEOS: true, Spec: sp, Turn: turn,
					OnLogits: func(r []float32) error { rows = append(rows, slices.Clone(r)); return nil }})
				if err != nil {
					t.Error(err)
				}
				return out, rows
			}
			specs := []engine.SpecOptions{{}, {Depth: 2, SuffixDraft: 3}, {Depth: 2, MTP: true}}
			var want [3][2][]int
			var wantRows [3][2][][]float32
			for k, sp := range specs {
				for i, p := range prompts {
					want[k][i], wantRows[k][i] = gen(l.Model.NewSession(), p, sp, nil)
				}
			}
			for _, copies := range []bool{false, true} { // CopyLanes lasts: forks first
				for k, sp := range specs {
					name := fmt.Sprintf("depth %d, mtp %v, suffix %d, copies %v", sp.Depth, sp.MTP, sp.SuffixDraft, copies)
					if copies {
						engine.CopyLanes(l.Model)
					}
					var lanes [2]*engine.Lane
					for i := range lanes {
						if lanes[i], err = l.Model.NewLane(); err != nil {
							t.Fatal(err)
						}
						if lanes[i].Copies() != copies {
							t.Fatalf("%s: lane copies %v", name, lanes[i].Copies())
						}
					}
					var got [2][]int
					var gotRows [2][][]float32
					rr := newRoundRobin(2)
					rr.run(func(i int, turn func(int) error) {
						got[i], gotRows[i] = gen(lanes[i].NewSession(), prompts[i], sp, turn)
					})
					if st := l.Model.StreamStats(); tc.arena > 0 && st.Misses == 0 {
						t.Fatalf("%s: the arena never missed: %+v", name, st)
					}
					if sw := switches(rr.log); sw < minSwitches {
						t.Fatalf("%s: only %d switches between the generations: %v", name, sw, rr.log)
					}
					for i := range got {
						if !slices.Equal(got[i], want[k][i]) {
							t.Fatalf("%s: prompt %d: interleaved %v, alone %v", name, i, got[i], want[k][i])
						}
						if len(gotRows[i]) != len(wantRows[k][i]) {
							t.Fatalf("%s: prompt %d: %d logit rows interleaved, %d alone", name, i, len(gotRows[i]), len(wantRows[k][i]))
						}
						for r := range wantRows[k][i] {
							if !slices.Equal(gotRows[i][r], wantRows[k][i][r]) {
								t.Fatalf("%s: prompt %d: logit row %d differs from the run alone", name, i, r)
							}
						}
					}
				}
			}
		})
	}
}

// BenchmarkLaneSwitch is a decode window that switches lanes every time
// (two sessions taking turns, one token each): on lanes with buffers of
// their own ("forked": nothing copied) and on lanes that swap the state
// through the model's memory ("copies": what backends that are no
// backend.Forker do), against one session alone ("one"). An op is a window
// of each session at the next position; ns/window is the metric to compare,
// state-MB what a swap copies each way. tiny-go, cpu backend, a context of
// 4096:
//
//	go test ./runtime/engine -run NONE -bench LaneSwitch -benchtime 1000x
func BenchmarkLaneSwitch(b *testing.B) {
	for _, mode := range []string{"one", "forked", "copies"} {
		b.Run(mode, func(b *testing.B) {
			l, err := load.HF(e2e.TinyGoDir(), e2e.WithGenerator(load.Options{Context: 4096}))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			if mode == "copies" {
				engine.CopyLanes(l.Model)
			}
			sess := []*engine.Session{l.Model.NewSession()}
			if mode != "one" {
				sess = nil
				for range 2 {
					ln, err := l.Model.NewLane()
					if err != nil {
						b.Fatal(err)
					}
					sess = append(sess, ln.NewSession())
				}
			}
			if b.N >= l.Model.Context() {
				b.Fatal("past the context: use a shorter -benchtime")
			}
			b.ResetTimer()
			for i := range b.N {
				for _, s := range sess {
					if _, err := s.Window([]int{(i*31 + 7) % 8000}); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(sess)), "ns/window")
			st := sess[0].Save(nil)
			if st.Bytes() != l.Model.LaneBytes() {
				b.Fatalf("a saved state holds %d bytes, LaneBytes says %d", st.Bytes(), l.Model.LaneBytes())
			}
			b.ReportMetric(float64(st.Bytes())/1e6, "state-MB")
		})
	}
}

// TestLanesSwapOnMSLEmu: on a backend that cannot fork its memory (the MSL
// emulator), lanes swap the state through the model's buffers, and two
// prompts taking turns still give the tokens and logits they get alone.
func TestLanesSwapOnMSLEmu(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("the emulator takes 20 s or so, 70 s under the race detector; the swap itself is TestLanesInterleaved's")
	}
	opt := e2e.MSLEmuOptions(t)
	opt.AllLogits = true
	l, err := load.HF(e2e.TinyGoDir(), e2e.WithGenerator(opt))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	prompts := [2][]int{{5, 17, 42, 3, 99, 7, 250, 8, 61, 12, 33, 4}, {300, 1, 2, 400, 77, 78, 79, 80, 200, 201, 150, 9, 10, 11, 90, 91, 92, 93, 94, 95}}
	const n = 6
	gen := func(s *engine.Session, prompt []int, turn func(int) error) ([]int, [][]float32) {
		var rows [][]float32
		out, err := s.Generate(prompt, n, engine.GenerateOptions{PrefillRows: 8, IgnoreEOS: true, Turn: turn, Spec: engine.SpecOptions{Depth: 2, MTP: true},
			OnLogits: func(r []float32) error { rows = append(rows, slices.Clone(r)); return nil }})
		if err != nil {
			t.Error(err)
		}
		return out, rows
	}
	var want, got [2][]int
	var wantRows, gotRows [2][][]float32
	for i, p := range prompts {
		want[i], wantRows[i] = gen(l.Model.NewSession(), p, nil)
	}
	var lanes [2]*engine.Lane
	for i := range lanes {
		if lanes[i], err = l.Model.NewLane(); err != nil {
			t.Fatal(err)
		}
		if !lanes[i].Copies() {
			t.Fatal("a lane of the emulator does not swap")
		}
	}
	rr := newRoundRobin(2)
	rr.run(func(i int, turn func(int) error) { got[i], gotRows[i] = gen(lanes[i].NewSession(), prompts[i], turn) })
	if sw := switches(rr.log); sw < 4 {
		t.Fatalf("only %d switches: %v", sw, rr.log)
	}
	for i := range got {
		if !slices.Equal(got[i], want[i]) || len(gotRows[i]) != len(wantRows[i]) {
			t.Fatalf("prompt %d: interleaved %v (%d logit rows), alone %v (%d)", i, got[i], len(gotRows[i]), want[i], len(wantRows[i]))
		}
		for r := range wantRows[i] {
			if !slices.Equal(gotRows[i][r], wantRows[i][r]) {
				t.Fatalf("prompt %d: logit row %d differs from the run alone", i, r)
			}
		}
	}
}

// TestStateMovesAcrossLanes: a state saved on one lane and restored on
// another (what the server's state cache does when a conversation comes
// back on another session), or a session marked and rewound while another
// lane runs between, computes the next window's logits bit for bit as the
// uninterrupted session does; forked lanes and swapped ones.
func TestStateMovesAcrossLanes(t *testing.T) {
	for _, copies := range []bool{false, true} {
		t.Run(fmt.Sprintf("copies %v", copies), func(t *testing.T) {
			l, err := load.HF(e2e.TinyGoDir(), e2e.WithGenerator(load.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			if copies {
				engine.CopyLanes(l.Model)
			}
			a, other, c := []int{5, 17, 42, 3, 99, 7, 250, 8}, []int{300, 1, 2, 400, 77, 78}, []int{21, 22, 23}
			window := func(s *engine.Session, toks []int) [][]float32 {
				t.Helper()
				out, err := s.Window(toks)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			same := func(what string, got, want [][]float32) {
				t.Helper()
				if len(got) != len(want) {
					t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
				}
				for r := range want {
					if !slices.Equal(got[r], want[r]) {
						t.Fatalf("%s: row %d differs from the uninterrupted session", what, r)
					}
				}
			}
			ref := l.Model.NewSession()
			window(ref, a)
			want := window(ref, c)

			var lanes [2]*engine.Lane
			for i := range lanes {
				if lanes[i], err = l.Model.NewLane(); err != nil {
					t.Fatal(err)
				}
			}
			s0 := lanes[0].NewSession()
			window(s0, a)
			st := s0.Save(nil)
			mk := s0.Mark()
			s1 := lanes[1].NewSession()
			window(s1, other)
			s1.Restore(st)
			same("restored on another lane", window(s1, c), want)

			window(s0, other) // past the mark on lane 0
			window(lanes[1].NewSession(), other)
			if err := s0.Rewind(mk); err != nil {
				t.Fatal(err)
			}
			same("rewound with another lane run between", window(s0, c), want)
		})
	}
}
