package mslemu_test

import (
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
)

// TestTinyGoBackends: tiny-go's reference (e2e.CheckTinyGo: the trunk and
// MTP rows, the greedy path's forward and its decode) through the generated
// MSL run by the lane emulator. (runtime/backend/metal's TestTinyGoBackends
// runs it through the Metal backend's encoding.)
func TestTinyGoBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: tiny-go through the emulator takes tens of seconds")
	}
	t.Run("mslemu", func(t *testing.T) { e2e.CheckTinyGo(t, e2e.MSLEmuOptions(t), 64) })
}
