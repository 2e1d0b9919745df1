package metal_test

import (
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
)

// TestTinyGoBackends: tiny-go's reference (e2e.CheckTinyGo) through the
// Metal backend's encoding (ICB replay) with the emulator standing in for
// the GPU. (runtime/backend/mslemu's TestTinyGoBackends runs the generated
// MSL through the emulator directly.)
func TestTinyGoBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: tiny-go through the emulator takes tens of seconds")
	}
	t.Run("metal-emu", func(t *testing.T) { e2e.CheckTinyGo(t, e2e.MetalEmuOptions(t, true), 64) })
}

// TestTinyGoChatBackends: tiny-go-chat's reference (e2e.CheckTinyGoChat:
// one 64-row window's trunk and MTP rows; the greedy tool call runs on cpu
// and cuda) through the Metal backend's encoding, the emulator standing in
// for the GPU.
func TestTinyGoChatBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: tiny-go-chat through the emulator takes tens of seconds")
	}
	t.Run("metal-emu", func(t *testing.T) { e2e.CheckTinyGoChat(t, e2e.MetalEmuOptions(t, true), 64, 64, false) })
}
