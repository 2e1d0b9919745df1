package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// statLines are the kinds of --stats report lines in stderr ("weights",
// "speculation", …).
func statLines(stderr string) []string {
	var kinds []string
	for _, m := range regexp.MustCompile(`(?m)^strata: (weights|speculation|spec gate|metal|streaming):`).FindAllStringSubmatch(stderr, -1) {
		kinds = append(kinds, m[1])
	}
	return kinds
}

// --stats reports the same with a text prompt as with token ids.
func TestStatsWithTextPrompt(t *testing.T) {
	_, ids, status := runStrata(t, "run", "--tokens", "1,2,3", "-n", "3", "--stats", "--arena-experts", "64")
	if status != 0 {
		t.Fatal(ids)
	}
	_, txt, status := runStrata(t, "run", "-p", "func main() {", "-n", "3", "--stats", "--arena-experts", "64")
	if status != 0 {
		t.Fatal(txt)
	}
	want := statLines(ids)
	if !slices.Contains(want, "weights") || !slices.Contains(want, "streaming") {
		t.Fatalf("--tokens --stats printed %v: %s", want, ids)
	}
	if got := statLines(txt); !slices.Equal(got, want) {
		t.Errorf("-p --stats printed %v, --tokens --stats %v:\n%s", got, want, txt)
	}
	if !strings.Contains(txt, "speculation: ") {
		t.Errorf("-p --stats: %s", txt)
	}
}
