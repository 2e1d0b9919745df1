package load_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/engine"
)

// expertSizes are tiny-k512's slot bytes, expert count and other buffers.
func expertSizes(t *testing.T) (int64, int, int64) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("../../testdata/oracles/tiny-k512", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := arch.ImportHF(data, models.ImportOptions{Name: "tiny-k512"})
	if err != nil {
		t.Fatal(err)
	}
	c.Windows.PrefillRows = 4 // as TestAutoArena opens it
	graphs, err := gen.Windows(c, true)
	if err != nil {
		t.Fatal(err)
	}
	s, n, o, err := engine.ExpertSlots(c, graphs)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4*512 {
		t.Fatalf("%d experts, tiny-k512 has 4 × 512", n)
	}
	return s, n, o
}
