package load

import (
	"fmt"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/sysmem"
)

// arenaMargin is what the automatic arena leaves the rest of the machine
// (or of the cgroup the process is held to): 10% of its memory, at least
// 1 GB.
func arenaMargin(total uint64) uint64 { return max(total/10, 1<<30) }

// arenaPlan is how the routed experts of a model are held.
type arenaPlan struct {
	slots   int    // arena slots; 0: every expert resident
	maxRows int    // rows a window may take so one layer's experts fit (0: any)
	note    string // one line for the user
}

// readMemory is the machine's memory (a variable so tests can fake one).
var readMemory = sysmem.Read

// planArena sizes the expert arena: ArenaExperts slots, or ArenaGB of
// memory, or (AutoArena) what the machine has available less the other
// buffers and a margin; every expert stays resident when they all fit.
// Windows are capped to the rows whose experts the arena holds at once
// (each row needs experts_per_token of a layer's experts), so any arena
// that holds one row's experts serves any prompt.
func planArena(c *models.Config, graphs []*graph.Graph, opt Options) (arenaPlan, error) {
	if opt.ArenaExperts > 0 && opt.ArenaGB > 0 {
		return arenaPlan{}, fmt.Errorf("--arena-experts and --arena-gb are two sizes for one arena; give one")
	}
	if opt.ArenaGB < 0 {
		return arenaPlan{}, fmt.Errorf("--arena-gb must be > 0, got %v", opt.ArenaGB)
	}
	if opt.ArenaExperts <= 0 && opt.ArenaGB == 0 && !opt.AutoArena {
		return arenaPlan{}, nil
	}
	if c.Architecture.MoE.NumExperts == 0 {
		return arenaPlan{note: "no routed experts: nothing to stream"}, nil
	}
	slotBytes, all, other, err := engine.ExpertSlots(c, graphs)
	if err != nil {
		return arenaPlan{}, err
	}
	gb := func(n int64) string { return sysmem.Size(uint64(max(n, 0))) }
	allBytes := int64(all) * slotBytes
	var p arenaPlan
	switch {
	case opt.ArenaExperts > 0:
		p.slots = opt.ArenaExperts
		p.note = fmt.Sprintf("expert arena of %d of %d experts (%s)", p.slots, all, gb(int64(p.slots)*slotBytes))
	case opt.ArenaGB > 0:
		p.slots = int(opt.ArenaGB * 1e9 / float64(slotBytes))
		if p.slots < 1 {
			return arenaPlan{}, fmt.Errorf("--arena-gb %v holds no expert: one takes %s", opt.ArenaGB, gb(slotBytes))
		}
		p.note = fmt.Sprintf("expert arena of %s: %d of %d experts", gb(int64(p.slots)*slotBytes), min(p.slots, all), all)
	default:
		m, err := readMemory()
		if err != nil {
			return arenaPlan{note: fmt.Sprintf("all %d experts resident (%s; the machine's available memory is unknown: %v)", all, gb(allBytes), err)}, nil
		}
		budget := int64(m.Available) - other - int64(arenaMargin(m.Total))
		if budget < int64(c.Architecture.MoE.ExpertsPerToken)*slotBytes {
			// Not even one row's experts fit beside the rest: the memory
			// check names what is too big (a --context, the trunk).
			return arenaPlan{note: fmt.Sprintf("%s available (per %s) cannot hold the other buffers (%s) and an expert arena", gb(int64(m.Available)), m.Source, gb(other))}, nil
		}
		if allBytes <= budget {
			return arenaPlan{note: fmt.Sprintf("all %d experts resident (%s; %s available, %s of other buffers, %s kept free; available per %s)",
				all, gb(allBytes), gb(int64(m.Available)), gb(other), gb(int64(arenaMargin(m.Total))), m.Source)}, nil
		}
		p.slots = int(max(budget, 0) / slotBytes)
		p.note = fmt.Sprintf("expert arena of %s: %d of %d experts (%s available − %s of other buffers − %s kept free; available per %s; --arena-gb sets it)",
			gb(int64(p.slots)*slotBytes), p.slots, all, gb(int64(m.Available)), gb(other), gb(int64(arenaMargin(m.Total))), m.Source)
	}
	if p.slots >= all {
		return arenaPlan{note: fmt.Sprintf("all %d experts resident (the arena asked for holds them all)", all)}, nil
	}
	k, perLayer := c.Architecture.MoE.ExpertsPerToken, c.Architecture.MoE.NumExperts
	if p.slots < k {
		return arenaPlan{}, fmt.Errorf("an expert arena of %d slots holds fewer than one row's %d experts (experts_per_token): give it at least %d (%s)",
			p.slots, k, k, gb(int64(k)*slotBytes))
	}
	if p.slots < perLayer {
		p.maxRows = p.slots / k
	}
	return p, nil
}

// capRows returns c with decode windows of at most maxRows rows (a copy
// when it changes), for an arena that holds maxRows rows' experts.
func capRows(c *models.Config, maxRows int) *models.Config {
	if maxRows <= 0 || c.Windows.MaxDecodeRows <= maxRows {
		return c
	}
	cc := *c
	cc.Windows.MaxDecodeRows = maxRows
	return &cc
}

// windowsFor takes the window graphs of c from its artifact, with the
// expert arena planned: opt comes back with ArenaExperts set (0: all
// resident), and the prefill rows and c's decode rows capped to what the
// arena holds (prefill falling back to the largest shape left).
func windowsFor(c *models.Config, a *artifact.Artifact, opt Options) (*models.Config, []*graph.Graph, int, Options, error) {
	rows := c.Windows.PrefillRows
	graphs, err := graphsOf(a, c, opt.AllLogits)
	if err != nil {
		return nil, nil, 0, opt, err
	}
	if want := opt.PrefillRows; want > 0 && want < rows {
		// The artifact's prefill shape is longer than the windows asked for
		// (findArtifact took one made for other shapes): the largest shape
		// that fits serves.
		graphs, rows = capGraphs(graphs, want)
		c = capRows(c, want)
	}
	p, err := planArena(c, graphs, opt)
	if err != nil {
		return nil, nil, 0, opt, fmt.Errorf("model %s: %w", c.Name, err)
	}
	opt.ArenaExperts = p.slots
	if p.maxRows > 0 && (rows > p.maxRows || c.Windows.MaxDecodeRows > p.maxRows) {
		var largest int
		graphs, largest = capGraphs(graphs, p.maxRows)
		p.note += fmt.Sprintf("; windows of at most %d rows (%d rows' experts fit)", p.maxRows, p.maxRows)
		if largest < p.maxRows && rows > largest {
			// The artifact has no prefill shape near the cap: prefill runs
			// in its largest shape that fits, at a fraction of the speed.
			p.note += fmt.Sprintf("; prefill in the artifact's %d-row windows (stratagen generate with --prefill-rows %d, then --prefill-rows %d, fills the arena)", largest, p.maxRows, p.maxRows)
		}
		rows = min(rows, largest)
		c = capRows(c, p.maxRows)
	}
	if opt.Note != nil && p.note != "" {
		opt.Note(p.note)
	}
	return c, graphs, rows, opt, nil
}
