package engine_test

import (
	"math"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/load"
)

// TestSessionSaveRestore: a session saved after a prompt, clobbered by
// another sequence and restored, computes the next window's logits bit for
// bit as the uninterrupted session does (tiny-a: GDN and attention; q4-a:
// also the PLE n-gram context and the QSA index caches).
func TestSessionSaveRestore(t *testing.T) {
	for _, name := range []string{"tiny-a", "q4-a"} {
		t.Run(name, func(t *testing.T) {
			l, err := load.HF(e2e.OracleDir(name), e2e.WithGenerator(load.Options{}))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			a := []int{5, 17, 42, 3, 99, 7, 250, 8, 61, 12, 33, 4}
			other := []int{300, 1, 2, 400, 77, 78, 79, 80, 200, 201, 150, 9, 10, 11, 90, 91, 92, 93, 94, 95}
			c := []int{21, 22, 23}
			window := func(s interface {
				Window([]int) ([][]float32, error)
			}, toks []int) [][]float32 {
				t.Helper()
				out, err := s.Window(toks)
				if err != nil {
					t.Fatal(err)
				}
				return out
			}
			ref := l.Model.NewSession()
			window(ref, a)
			want := window(ref, c)

			s := l.Model.NewSession()
			window(s, a)
			st := s.Save(nil)
			if st.Pos() != len(a) || st.Bytes() == 0 {
				t.Fatalf("saved at %d with %d bytes", st.Pos(), st.Bytes())
			}
			s2 := l.Model.NewSession()
			window(s2, other)
			s2.Restore(st)
			if s2.Pos() != len(a) {
				t.Fatalf("restored at %d, want %d", s2.Pos(), len(a))
			}
			got := window(s2, c)
			if len(got) != len(want) {
				t.Fatalf("%d rows, want %d", len(got), len(want))
			}
			for r := range want {
				for i := range want[r] {
					if math.Float32bits(got[r][i]) != math.Float32bits(want[r][i]) {
						t.Fatalf("row %d logit %d: %v after the restore, %v uninterrupted", r, i, got[r][i], want[r][i])
					}
				}
			}
		})
	}
}
