package cpu

import (
	"testing"

	"github.com/strata-llm/strata/internal/asmcheck"
)

// TestAssemblyNotStale regenerates vec_amd64.s and its declarations with
// the avo generator in asm/ (what go generate runs) and fails when the
// checked-in files differ.
func TestAssemblyNotStale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator (-short)")
	}
	asmcheck.NotStale(t, "asm", "vec_amd64.s", "vec_amd64_decl.go", "cpu")
}
