package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/strata-llm/strata/templates/msl"
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
	} {
		if _, errText, status := runStrata(t, c.args...); status != 2 || !strings.Contains(errText, c.want) {
			t.Errorf("%v: status %d, stderr %q; want status 2 and %q", c.args, status, errText, c.want)
		}
	}
	if _, err := msl.Clang(); errors.Is(err, msl.ErrNoClang) {
		if os.Getenv("STRATA_REQUIRE_CLANG") != "" {
			t.Fatal("STRATA_REQUIRE_CLANG is set but " + err.Error())
		}
		t.Skip("skipping mslemu: " + err.Error())
	}
	out, errText, status := runStrata(t, "run", "--backend", "mslemu")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	want := refInts(t, tinyA, "greedy_tokens")[16:32]
	if strings.TrimSpace(out) != joinInts(want, " ") {
		t.Fatalf("stdout %q, want %q", out, joinInts(want, " "))
	}
}
