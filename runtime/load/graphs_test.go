package load_test

import (
	"os"
	"slices"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/weights"
)

// TestGeneratedGraphsRun: the checked-in artifact of tiny-a, loaded from
// its folder as the runtime loads one, decodes the reference greedy path
// (prefill in the 16-row last-row-logits shape, then 1-row windows).
func TestGeneratedGraphsRun(t *testing.T) {
	c, err := models.Load(e2e.Path("models", "tiny-a", "model.toml"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := artifact.Load(os.DirFS("../../generated/tiny-a/artifact"))
	if err != nil {
		t.Fatal(err)
	}
	graphs, err := load.GraphsOf(a, c, false)
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir("../../testdata/oracles/tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := engine.LoadWith(c, graphs, weights.NewHF(ck, c), cpu.Backend)
	if err != nil {
		t.Fatal(err)
	}
	ref := e2e.Ref(t, "tiny-a")
	got, err := m.NewSession().Generate(ref.Greedy[:16], 48, engine.GenerateOptions{PrefillRows: c.Windows.PrefillRows})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, ref.Greedy[16:]) {
		t.Fatalf("greedy tokens %v, want %v", got, ref.Greedy[16:])
	}
}
