package spec

import (
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// trained is a gate that has seen cheap windows and confident drafts.
func trained() *Gate {
	g := NewGate(3)
	for i := 0; i < 20; i++ {
		g.ObserveWindow(1, 1)
		g.ObserveWindow(4, 1.3)
		g.ObservePrefill(4, 1.2)
		g.ObserveRerun(1, 0.8)
		g.ObserveVerify(SourceSuffix, 3, 3, nil)
		g.ObserveHeadFeed(64, 6.4)
	}
	return g
}

// A saved gate starts the next run warm: a fresh gate drafts from its first
// pick, where one with nothing loaded measures T(1) with a plain step.
func TestGateSaveLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf.spec")
	if err := trained().Save(path, "cpu arena=40"); err != nil {
		t.Fatal(err)
	}
	g := NewGate(3)
	if err := g.Load(path, "cpu arena=40"); err != nil {
		t.Fatal(err)
	}
	if g.feedRow.n == 0 || math.Abs(g.feedRow.v-0.1) > 1e-12 {
		t.Errorf("MTP head feed cost %v over %d samples after loading, want 0.1", g.feedRow.v, g.feedRow.n)
	}
	if k := g.Pick(SourceSuffix, 3, nil); k != 3 {
		t.Errorf("warm gate's first pick %d, want 3; %s", k, g.Report())
	}
	if cold := NewGate(3); cold.Pick(SourceSuffix, 3, nil) != 0 {
		t.Errorf("a cold gate drafts at its first pick")
	}
	// Loaded estimates weigh as a couple of samples: the run's own
	// measurements take over quickly.
	for i := 0; i < 4; i++ {
		g.ObserveWindow(4, 5)
	}
	if got, want := g.windowTime(4), (2*1.3+4*5)/6.0; math.Abs(got-want) > 1e-9 {
		t.Errorf("T(4) = %.3f after 4 windows of 5 s over a loaded 1.3 s, want %.3f (the loaded one weighs 2 samples)", got, want)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("%d files next to the state, want only it (no temporary left)", len(entries))
	}
}

// A damaged, foreign or missing file is an error and leaves the gate cold.
func TestGateLoadRefuses(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := trained().Save(good, "k"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		name, path, key, want string
	}{
		{"truncated", write("truncated", string(data[:len(data)/2])), "k", "damaged"},
		{"garbage", write("garbage", "\x00\x01 not json"), "k", "damaged"},
		{"other version", write("version", strings.Replace(string(data), `"version": 1`, `"version": 99`, 1)), "k", "version 99"},
		{"out of range", write("range", strings.Replace(string(data), `"accept": [`, `"accept": [[{"v": 7, "n": 3}],`, 1)), "k", "damaged"},
		{"other key", good, "other", "measured under"},
	} {
		g := NewGate(3)
		err := g.Load(c.path, c.key)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one saying %q", c.name, err, c.want)
		}
		if k := g.Pick(SourceSuffix, 3, nil); k != 0 {
			t.Errorf("%s: the refused file warmed the gate (first pick %d)", c.name, k)
		}
	}
	if err := NewGate(3).Load(filepath.Join(dir, "missing"), "k"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}
