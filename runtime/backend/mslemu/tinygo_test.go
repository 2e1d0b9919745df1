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

// TestTinyGoChatBackends: tiny-go-chat's reference (e2e.CheckTinyGoChat)
// through the lane emulator: one 64-row window's trunk and MTP rows (the
// weights differ from tiny-go's, the graphs do not; the greedy tool call
// runs on cpu and cuda).
func TestTinyGoChatBackends(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: tiny-go-chat through the emulator takes tens of seconds")
	}
	t.Run("mslemu", func(t *testing.T) { e2e.CheckTinyGoChat(t, e2e.MSLEmuOptions(t), 64, 64, false) })
}
