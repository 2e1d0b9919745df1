package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/spec"
	"github.com/strata-llm/strata/runtime/load"
)

// specGateFile is the spec gate of --spec auto (nil otherwise) and the
// --spec-state file its estimates are kept in from one run to the next.
type specGateFile struct {
	gate      *spec.Gate
	path, key string
}

// loadSpecGate gives sp a spec gate sized for the loaded model when sp is
// --spec auto, seeded from --spec-state (default FILE.spec next to a --gguf
// FILE; - for none). A file that does not fit is ignored with a warning.
func loadSpecGate(sp *engine.SpecOptions, specState, ggufPath string, l *load.Loaded, backend string, arena, ioThreads int, stderr io.Writer) *specGateFile {
	// The gate's timings hold for this machine, backend and arena only.
	g := &specGateFile{path: specState, key: fmt.Sprintf("%s backend=%s arena-experts=%d io-threads=%d", l.Config.Name, backend, arena, ioThreads)}
	if g.path == "" && ggufPath != "" {
		g.path = ggufPath + ".spec"
	}
	if g.path == "-" {
		g.path = ""
	}
	if sp.Depth != engine.Auto {
		return g
	}
	g.gate = spec.NewGate(l.Config.Windows.MaxDecodeRows - 1)
	sp.Gate = g.gate
	if g.path != "" {
		if err := g.gate.Load(g.path, g.key); err != nil && !errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(stderr, "strata: warning: ignoring the spec gate's saved estimates: %v\n", err)
		}
	}
	return g
}

// save writes the gate's estimates back to --spec-state (a warning when that
// fails: the answer is out already).
func (g *specGateFile) save(stderr io.Writer) {
	if g.gate == nil || g.path == "" {
		return
	}
	if err := g.gate.Save(g.path, g.key); err != nil {
		fmt.Fprintf(stderr, "strata: warning: %v\n", err)
	}
}
