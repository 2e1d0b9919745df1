package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
)

// The n-gram rows a window gathers are read ahead: the whole prompt's before
// its first window, each decode window's right after its drafts are chosen.
// q4-a hashes 2-grams and 3-grams with 2 heads each (4 rows a token) for one
// PLE layer: a 16-token prompt and 8 generated tokens (7 decode windows of
// one row) read 23 × 4 rows ahead, and decode the reference greedy tokens.
func TestNgramRowsReadAhead(t *testing.T) {
	l, ref := e2e.OpenOracle(t, "q4-a", load.Options{PrefillRows: 5})
	out, err := l.Model.NewSession().Generate(ref.Greedy[:16], 8, engine.GenerateOptions{PrefillRows: l.PrefillRows})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(out, ref.Greedy[16:24]) {
		t.Errorf("tokens %v, want %v", out, ref.Greedy[16:24])
	}
	const want = (16 + 7) * 4
	deadline := time.Now().Add(5 * time.Second)
	for l.Model.NgramRowsPrefetched() < want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := l.Model.NgramRowsPrefetched(); got != want {
		t.Errorf("%d n-gram rows read ahead, want %d", got, want)
	}
}
