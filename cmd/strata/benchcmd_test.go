package main

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// strata bench prints one row per configuration, baseline first at ×1.00,
// with what speculation did (accepted drafts, tokens per window, MTP head
// rows per token) and the spec gate's report of an auto configuration; bad
// lists are usage errors.
func TestBenchCommand(t *testing.T) {
	out, errText, status := runStrata(t, "bench", "-p", "8", "-n", "4", "-r", "2", "--warmup", "0", "--spec", "0,2,auto", "--repeat", "2")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 6 || !strings.HasSuffix(lines[1], "MTP rows") {
		t.Fatalf("output:\n%s", out)
	}
	plain, two := strings.Fields(lines[2]), strings.Fields(lines[3])
	if plain[0] != "spec=0" || !slices.Equal(plain[len(plain)-4:], []string{"1.00", "—", "1.00", "0.00"}) ||
		two[0] != "spec=2" || !strings.HasSuffix(two[len(two)-3], "%") ||
		!strings.HasPrefix(lines[4], "spec=auto ") || !strings.HasPrefix(lines[5], "spec=auto: spec gate: ") {
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
		{[]string{"bench", "--temperature", "-1"}, "--temperature must be a number ≥ 0"},
	} {
		if _, errText, status := runStrata(t, c.args...); status != 2 || !strings.Contains(errText, c.want) {
			t.Errorf("%v: status %d, stderr %q; want status 2 and %q", c.args, status, errText, c.want)
		}
	}
}

// A streamed configuration's tg is explained per token: the experts routed
// per token are the layers' top-k (tiny-go: 8 MoE layers × top 4, one row a
// window), hits and misses add up to them, and the disk probe gives the
// limit (through the weight source: the embedded model has no pack).
func TestBenchStreamTable(t *testing.T) {
	out, errText, status := runStrata(t, "bench", "-p", "8", "-n", "6", "-r", "1", "--warmup", "0",
		"--arena-experts", "0,40", "--temperature", "1", "--probe-experts", "8")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	_, table, ok := strings.Cut(out, "streamed decoding, per generated token")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if !ok || len(lines) != 3 || !strings.Contains(lines[1], "limit") || !strings.HasPrefix(lines[2], "arena=40 (40 slots)") {
		t.Fatalf("output:\n%s", out)
	}
	f := strings.Fields(strings.TrimPrefix(lines[2], "arena=40 (40 slots)"))
	routed, hits, misses := parseF(t, f[0]), parseF(t, f[1]), parseF(t, f[2])
	if routed <= 0 || math.Abs(hits+misses-routed) > 0.11 || f[8] == "—" || f[10] == "—" {
		t.Fatalf("routed %v, hits %v, misses %v (want hits + misses = routed > 0) and a limit:\n%s", routed, hits, misses, out)
	}
}

func parseF(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return v
}
