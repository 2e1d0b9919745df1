package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"os"

	"github.com/strata-llm/strata/internal/outfile"
)

// gateFileVersion is the version of the file Save writes; Load refuses others.
const gateFileVersion = 1

// warmSamples caps the weight of each loaded average: a saved estimate is
// where a new run starts, and its own first measurements soon outweigh it.
const warmSamples = 2

type emaFile struct {
	V float64 `json:"v"`
	N int     `json:"n"`
}

// gateFile is what Save keeps of a gate: its averages, not its counters.
type gateFile struct {
	Version int `json:"version"`
	// Key names the conditions the timings were taken under (backend, arena
	// size, …); a gate loads only a file with its own key.
	Key      string                `json:"key"`
	Windows  map[int]emaFile       `json:"windows"` // T(n), seconds
	Prefill  map[int]emaFile       `json:"prefill"`
	Rerun    emaFile               `json:"rerun"` // share of T(n)
	Accept   [numSources][]emaFile `json:"accept"`
	Prob     [numSources][]emaFile `json:"prob"`
	Drafting [numSources]emaFile   `json:"drafting"`  // seconds per draft
	HeadFeed emaFile               `json:"head_feed"` // seconds per row of an MTP head window (0 samples in older files)
}

// Save writes the gate's estimates to path (a temporary file renamed over
// it, so a crash leaves the old file or the new one), tagged with key.
func (g *Gate) Save(path, key string) error {
	f := gateFile{Version: gateFileVersion, Key: key, Windows: map[int]emaFile{}, Prefill: map[int]emaFile{},
		Rerun: emaFile{g.rerun.v, g.rerun.n}, HeadFeed: emaFile{g.feedRow.v, g.feedRow.n}}
	for n, e := range g.rowTime {
		f.Windows[n] = emaFile{e.v, e.n}
	}
	for n, e := range g.prior {
		f.Prefill[n] = emaFile{e.v, e.n}
	}
	for s := range numSources {
		for j := range g.acc[s] {
			f.Accept[s] = append(f.Accept[s], emaFile{g.acc[s][j].v, g.acc[s][j].n})
			f.Prob[s] = append(f.Prob[s], emaFile{g.prob[s][j].v, g.prob[s][j].n})
		}
		f.Drafting[s] = emaFile{g.draftCost[s].v, g.draftCost[s].n}
	}
	data, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return fmt.Errorf("spec gate state: %w", err)
	}
	if err := outfile.WriteFile(path, append(data, '\n')); err != nil {
		return fmt.Errorf("spec gate state: %w", err)
	}
	return nil
}

// Load starts the gate from estimates Save wrote under the same key, each
// weighted as at most warmSamples measurements. A missing file is an error
// that wraps fs.ErrNotExist; a damaged one, another version or another key
// is an error and leaves the gate as it was.
func (g *Gate) Load(path, key string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("spec gate state: %w", err)
	}
	var f gateFile
	if err := json.Unmarshal(data, &f); err != nil {
		return fmt.Errorf("spec gate state %s is damaged: %w", path, err)
	}
	if f.Version != gateFileVersion {
		return fmt.Errorf("spec gate state %s has version %d, this build reads %d", path, f.Version, gateFileVersion)
	}
	if f.Key != key {
		return fmt.Errorf("spec gate state %s was measured under %q, not %q", path, f.Key, key)
	}
	if err := f.check(); err != nil {
		return fmt.Errorf("spec gate state %s is damaged: %w", path, err)
	}
	warm := func(e emaFile) ema { return ema{v: e.V, n: min(e.N, warmSamples)} }
	for n, e := range f.Windows {
		if n <= g.MaxDepth+1 && e.N > 0 {
			w := warm(e)
			g.rowTime[n] = &w
		}
	}
	for n, e := range f.Prefill {
		if n <= g.MaxDepth+1 && e.N > 0 {
			w := warm(e)
			g.prior[n] = &w
		}
	}
	g.rerun = warm(f.Rerun)
	for s := range numSources {
		for j := 0; j < len(f.Accept[s]) && j < g.MaxDepth; j++ {
			g.acc[s][j] = warm(f.Accept[s][j])
			if j < len(f.Prob[s]) {
				g.prob[s][j] = warm(f.Prob[s][j])
			}
		}
		g.draftCost[s] = warm(f.Drafting[s])
	}
	g.feedRow = warm(f.HeadFeed)
	return nil
}

// check rejects values no gate could have measured.
func (f *gateFile) check() error {
	bad := func(e emaFile, lo, hi float64) bool {
		return e.N < 0 || math.IsNaN(e.V) || e.V < lo || e.V > hi
	}
	for n, e := range f.Windows {
		if n < 1 || bad(e, 0, math.MaxFloat64) {
			return fmt.Errorf("window time for %d rows: %v over %d samples", n, e.V, e.N)
		}
	}
	for n, e := range f.Prefill {
		if n < 1 || bad(e, 0, math.MaxFloat64) {
			return fmt.Errorf("prefill time for %d rows: %v over %d samples", n, e.V, e.N)
		}
	}
	if bad(f.HeadFeed, 0, math.MaxFloat64) {
		return fmt.Errorf("MTP head feed cost %v over %d samples", f.HeadFeed.V, f.HeadFeed.N)
	}
	if bad(f.Rerun, 0, math.MaxFloat64) {
		return fmt.Errorf("re-run share %v over %d samples", f.Rerun.V, f.Rerun.N)
	}
	for s := range numSources {
		for j, e := range f.Accept[s] {
			if bad(e, 0, 1) {
				return fmt.Errorf("acceptance at position %d: %v over %d samples", j+1, e.V, e.N)
			}
		}
		for j, e := range f.Prob[s] {
			if bad(e, -1, 1) {
				return fmt.Errorf("drafter probability at position %d: %v over %d samples", j+1, e.V, e.N)
			}
		}
		if bad(f.Drafting[s], 0, math.MaxFloat64) {
			return fmt.Errorf("drafting cost %v over %d samples", f.Drafting[s].V, f.Drafting[s].N)
		}
	}
	return nil
}
