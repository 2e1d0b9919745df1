package main

import (
	"strings"
	"testing"
)

// strata bench prints one row per configuration, baseline first at ×1.00;
// bad lists are usage errors.
func TestBenchCommand(t *testing.T) {
	out, errText, status := runStrata(t, "bench", "-p", "8", "-n", "4", "-r", "2", "--warmup", "0", "--spec", "0,2", "--repeat", "2")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 || !strings.HasPrefix(lines[2], "spec=0 ") || !strings.HasSuffix(lines[2], "1.00") || !strings.HasPrefix(lines[3], "spec=2 ") {
		t.Fatalf("output:\n%s", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--backend", "cpu,gpu"}, `"gpu" is not one of`},
		{[]string{"bench", "--spec", "x"}, `--spec is "x"`},
		{[]string{"bench", "--arena-experts", "-1"}, `"-1" is not a number of experts`},
		{[]string{"bench", "-r", "0"}, "must be ≥ 1"},
	} {
		if _, errText, status := runStrata(t, c.args...); status != 2 || !strings.Contains(errText, c.want) {
			t.Errorf("%v: status %d, stderr %q; want status 2 and %q", c.args, status, errText, c.want)
		}
	}
}
