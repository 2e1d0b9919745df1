package quant

import (
	"testing"

	"github.com/strata-llm/strata/internal/asmcheck"
)

// TestAct8AssemblyNotStale: act8_amd64.s and its declarations equal what
// the generator in asm/act8 writes now.
func TestAct8AssemblyNotStale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator (-short)")
	}
	asmcheck.NotStale(t, "asm/act8", "act8_amd64.s", "act8_amd64_decl.go", "quant")
}
