package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/backend/mslemu"
)

// strata run --backend mslemu continues the default prompt exactly as the
// cpu backend (and HF) do; bad backend flags are usage errors.
func TestRunMSLEmu(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--backend", "gpu"}, `--backend is "gpu"`},
		{[]string{"run", "--sanitize", "thread"}, "with --backend mslemu"},
		{[]string{"run", "--backend", "mslemu", "--sanitize", "memory"}, `--sanitize is "memory"`},
		{[]string{"run", "--icb"}, "apply to --backend metal"},
		{[]string{"run", "--backend", "metal", "--keepalive", "-1s"}, "--keepalive must be ≥ 0"},
	} {
		if _, errText, status := runStrata(t, c.args...); status != 2 || !strings.Contains(errText, c.want) {
			t.Errorf("%v: status %d, stderr %q; want status 2 and %q", c.args, status, errText, c.want)
		}
	}
	if _, err := mslemu.Clang(); errors.Is(err, mslemu.ErrNoClang) {
		if os.Getenv("STRATA_REQUIRE_CLANG") != "" {
			t.Fatal("STRATA_REQUIRE_CLANG is set but " + err.Error())
		}
		t.Skip("skipping mslemu: " + err.Error())
	}
	want := defaultRunText(t)
	for _, args := range [][]string{{"--backend", "mslemu"}, {"--backend", "metal-emu", "--icb", "--stats"}} {
		out, errText, status := runStrata(t, append([]string{"run"}, args...)...)
		if status != 0 {
			t.Fatalf("%v: status %d: %s", args, status, errText)
		}
		if out != want {
			t.Fatalf("%v: stdout %q, want %q", args, out, want)
		}
		if args[1] == "metal-emu" && !strings.Contains(errText, "commands replayed from ICBs") {
			t.Errorf("%v: no metal telemetry in %q", args, errText)
		}
	}
}
