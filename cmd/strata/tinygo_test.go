package main

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/reftensor"
)

const tinyGo = "../../models/tiny-go"

// refRows reads rows of an f32 [rows, vocab] tensor.
func refRows(t *testing.T, path, name string) [][]float32 {
	t.Helper()
	return reftensor.Open(t, path).Rows(name)
}

// TestDumpMTP: strata run --dump-logits F --dump-mtp on tiny-go writes the
// MTP head's teacher-forced rows, and they are tiny-go's HF reference rows
// (float32 rounding of float64, |logit| up to ~20).
func TestDumpMTP(t *testing.T) {
	const fed = 41
	tokens := refInts(t, tinyGo, "tokens")[:fed]
	path := filepath.Join(t.TempDir(), "dump.safetensors")
	_, errText, status := runStrata(t, "run", "--hf", tinyGo, "--tokens", joinInts(tokens, ","), "-n", "0", "--prefill-rows", "16", "--dump-logits", path, "--dump-mtp")
	if status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	got := refRows(t, path, "mtp_logits")
	if len(got) != fed-1 {
		t.Fatalf("mtp_logits has %d rows, want fed − 1 = %d", len(got), fed-1)
	}
	ref := filepath.Join(tinyGo, "reference.safetensors")
	want, at := refRows(t, ref, "mtp_logits"), refInts(t, tinyGo, "mtp_positions")
	checked := 0
	for i, p := range at {
		if p >= len(got) {
			continue
		}
		checked++
		for j := range want[i] {
			if d := math.Abs(float64(got[p][j]) - float64(want[i][j])); d > 5e-4 {
				t.Fatalf("mtp_logits row %d, token %d: %g, reference %g", p, j, got[p][j], want[i][j])
			}
		}
	}
	if checked < 10 {
		t.Fatalf("only %d reference MTP rows fall in the %d dumped rows", checked, len(got))
	}
}

func TestDumpMTPErrors(t *testing.T) {
	_, errText, status := runStrata(t, "run", "--hf", tinyGo, "--tokens", "1,2", "--dump-mtp")
	if status != 2 || !strings.Contains(errText, "give --dump-logits FILE too") {
		t.Errorf("--dump-mtp without --dump-logits: status %d, %q", status, errText)
	}
	path := filepath.Join(t.TempDir(), "d.safetensors")
	_, errText, status = runStrata(t, "run", "--hf", tinyA, "--tokens", "1,2", "-n", "1", "--dump-logits", path, "--dump-mtp")
	if status != 1 || !strings.Contains(errText, "has no MTP head") {
		t.Errorf("--dump-mtp on tiny-a: status %d, %q", status, errText)
	}
}
