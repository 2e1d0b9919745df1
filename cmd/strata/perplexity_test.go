package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// tinyGoText writes the text of tiny-go's reference tokens to a file and
// returns it with the reference's mean NLL over them (HF, float64).
func tinyGoText(t *testing.T) (path string, meanNLL float64) {
	path, meanNLL, _ = tinyGoTextMTP(t)
	return path, meanNLL
}

// tinyGoTextMTP also returns the share of positions whose MTP argmax is the
// token after next (reference.json's mtp_argmax_matches_next_next_token).
func tinyGoTextMTP(t *testing.T) (path string, meanNLL, mtpTop1 float64) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tinyGo, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Text    string  `json:"tokens_text"`
		MeanNLL float64 `json:"tokens_mean_nll"`
		MTPTop1 float64 `json:"mtp_argmax_matches_next_next_token"`
		Len     int     `json:"tokens_len"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "ref.txt")
	if err := os.WriteFile(path, []byte(ref.Text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, ref.MeanNLL, ref.MTPTop1
}

var (
	nllRE = regexp.MustCompile(`mean NLL ([0-9.]+) nats/token`)
	mtpRE = regexp.MustCompile(`top-1 \(depth-1 draft acceptance\) ([0-9.]+)%`)
)

// TestPerplexityReference: strata perplexity over the text of tiny-go's
// reference tokens, one window of all 256 tokens scored from position 0,
// gives the reference's mean NLL (HF float64: 2.9374 over 255 predictions)
// and, with --mtp, its MTP top-1 (34.65% of the 254 positions with a token
// after next).
func TestPerplexityReference(t *testing.T) {
	text, want, wantMTP := tinyGoTextMTP(t)
	out, errText, status := runStrata(t, "perplexity", "--hf", tinyGo, "--ctx", "256", "--first", "0", "--mtp", "-f", text)
	if status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	if !strings.Contains(out, "256 tokens of 1 file(s); 255 scored") {
		t.Fatalf("the text is not the 256 reference tokens: %s", out)
	}
	m := nllRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no mean NLL in %q", out)
	}
	got, _ := strconv.ParseFloat(m[1], 64)
	if math.Abs(got-want) > 1e-4 {
		t.Errorf("mean NLL %v, reference %v", got, want)
	}
	m = mtpRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no MTP top-1 in %q", out)
	}
	if got, _ := strconv.ParseFloat(m[1], 64); math.Abs(got-100*wantMTP) > 0.01 {
		t.Errorf("MTP top-1 %v%%, reference %.2f%%", got, 100*wantMTP)
	}
}

// TestPerplexityKLBase: the first run saves the base (2 windows of 64,
// each scored from 32: 2 × 31 rows), a second run of the
// same model against it has KL 0 and the same top token everywhere; other
// windows are refused; -f is required.
func TestPerplexityKLBase(t *testing.T) {
	text, _ := tinyGoText(t)
	base := filepath.Join(t.TempDir(), "base.safetensors")
	args := []string{"perplexity", "--ctx", "64", "--chunks", "2", "-f", text, "--kl-base", base}
	out, errText, status := runStrata(t, args...)
	if status != 0 || !strings.Contains(out, "saved 62 rows") {
		t.Fatalf("status %d: %s %s", status, out, errText)
	}
	out, errText, status = runStrata(t, args...)
	if status != 0 || !strings.Contains(out, "KL divergence from "+base+": mean 0.000000, p99 0.000000, max 0.000000; same top token 100.00%") {
		t.Fatalf("status %d: %s %s", status, out, errText)
	}
	// Streaming the experts through a small arena, one token per window, leaves
	// every distribution as it was.
	batch := "1"
	if raceEnabled {
		batch = "8" // still several streamed windows a chunk
	}
	out, errText, status = runStrata(t, append(args, "--arena-experts", "40", "--batch", batch, "--stats")...)
	if status != 0 || !strings.Contains(out, "max 0.000000; same top token 100.00%") || !strings.Contains(out, "streaming: arena of 40 experts; hit rate") {
		t.Fatalf("streamed: status %d: %s %s", status, out, errText)
	}
	_, errText, status = runStrata(t, "perplexity", "--ctx", "32", "--chunks", "2", "-f", text, "--kl-base", base)
	if status != 1 || !strings.Contains(errText, "scored other text or windows") {
		t.Errorf("other windows against the base: status %d, %s", status, errText)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"perplexity"}, "give -f FILE"},
		{[]string{"perplexity", "-f", text, "--ctx", "1"}, "--ctx must be ≥ 2"},
		{[]string{"perplexity", "-f", text, "--spread"}, "--spread needs --chunks ≥ 2"},
		{[]string{"perplexity", "-f", text, "--moce-lambda", "0.7"}, "add --moce"},
	} {
		if _, errText, status := runStrata(t, c.args...); status != 2 || !strings.Contains(errText, c.want) {
			t.Errorf("%v: status %d, %q; want 2 and %q", c.args, status, errText, c.want)
		}
	}
}
