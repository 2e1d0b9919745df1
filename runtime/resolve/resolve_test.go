package resolve

import (
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
)

// The run's options land in the config the key is computed from: prefill
// rows replace windows.prefill_rows, --moce fills the knobs (λ 0.85, 3
// protected ranks, max rank 16, or every expert with -1), and the config
// given is never changed.
func TestApply(t *testing.T) {
	base, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	before := *base
	c, err := Apply(base, Options{PrefillRows: 5})
	if err != nil || c.Windows.PrefillRows != 5 || c.Runtime.MoCE {
		t.Errorf("prefill rows 5: %+v %v", c.Windows, err)
	}
	c, err = Apply(base, Options{MoCE: true})
	if err != nil || !c.Runtime.MoCE || c.Runtime.MoCELambda != 0.85 || c.Runtime.MoCEProtect != 3 || c.Runtime.MoCEMaxRank != 16 {
		t.Errorf("--moce: %+v %v", c.Runtime, err)
	}
	c, err = Apply(base, Options{MoCE: true, MoCEMaxRank: -1, MoCELambda: 0.5})
	if err != nil || c.Runtime.MoCEMaxRank != base.Architecture.MoE.NumExperts || c.Runtime.MoCELambda != 0.5 {
		t.Errorf("--moce-max-rank -1 --moce-lambda 0.5: %+v %v", c.Runtime, err)
	}
	if c, err := Apply(base, Options{}); err != nil || c != base {
		t.Errorf("no options: a copy (%v)", err)
	}
	if _, err := Apply(base, Options{PrefillRows: -1}); err == nil || !strings.Contains(err.Error(), "--prefill-rows") {
		t.Errorf("negative prefill rows: %v", err)
	}
	if base.Windows != before.Windows || base.Runtime != before.Runtime {
		t.Error("Apply changed the config it was given")
	}
}

// An HF checkpoint's config: the folder names it, --context sets the
// context, and a context past max_position_embeddings is refused naming
// both numbers.
func TestHF(t *testing.T) {
	c, err := HF("../../testdata/oracles/tiny-a", Options{Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	if c.Name != "tiny-a" || c.Runtime.ContextLength != 512 {
		t.Errorf("name %q context %d", c.Name, c.Runtime.ContextLength)
	}
	limit := c.Architecture.Attention.MaxPositions
	if _, err := HF("../../testdata/oracles/tiny-a", Options{Context: limit + 1}); err == nil || !strings.Contains(err.Error(), "max_position_embeddings") {
		t.Errorf("context past the positions: %v", err)
	}
	if _, err := HF("no/such/dir", Options{}); err == nil || !strings.Contains(err.Error(), "no/such/dir/config.json") {
		t.Errorf("missing config: %v", err)
	}
}
