package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
)

// Streamed experts land in the engine's experts buffer, which is page-aligned,
// so every arena read bypasses the page cache where the filesystem allows it;
// --stats says so, and the tokens are those of the fully resident model.
func TestRunStreamingIOPath(t *testing.T) {
	out := filepath.Join(t.TempDir(), "synth.gguf")
	if _, stderr, status := runStrata(t, "synth", "--model", "tiny-k512", "--experts", "64", "--top-k", "8", "-o", out); status != 0 {
		t.Fatalf("synth: status %d: %s", status, stderr)
	}
	if _, stderr, status := runStrata(t, "pack", out); status != 0 {
		t.Fatalf("pack: status %d: %s", status, stderr)
	}
	g, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	p, err := pack.Open(pack.Path(out), g)
	if err != nil {
		t.Fatal(err)
	}
	want := p.IOPath()
	p.Close()

	args := []string{"run", "--gguf", out, "--tokens", "1,2,3", "-n", "6", "--prefill-rows", "2"}
	resident, stderr, status := runStrata(t, args...)
	if status != 0 {
		t.Fatalf("run: status %d: %s", status, stderr)
	}
	streamed, stderr, status := runStrata(t, append(args, "--arena-experts", "16", "--stats")...)
	if status != 0 {
		t.Fatalf("run --arena-experts: status %d: %s", status, stderr)
	}
	if streamed != resident {
		t.Errorf("streamed tokens %q, resident %q", streamed, resident)
	}
	if !strings.Contains(stderr, "; reads "+want+", ") {
		t.Errorf("--stats does not report the pack's I/O path %q:\n%s", want, stderr)
	}
	if strings.Contains(stderr, "unaligned") {
		t.Errorf("arena reads went through the page cache for want of alignment:\n%s", stderr)
	}
	t.Logf("%s", stderr)
}
