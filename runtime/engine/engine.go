// Package engine is the decode loop: it loads a model's window graphs and
// weights into memory, runs prefill in windows of up to the configured rows and
// then one-row decode windows (speculative ones with drafts), and samples each
// token through the sampling chain of runtime/engine/sample (greedy by default).
package engine

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/ngram"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/weights"
)

// WeightSource fills weight tensors: the whole tensor (index −1) or slice index
// of a stacked one, converted to format, into dst.
type WeightSource interface {
	Read(spec models.TensorSpec, index int, format string, dst []byte) error
}

// NgramSource is a WeightSource that also serves the PLE layers' n-gram
// tables, row by row (they stay on disk).
type NgramSource interface {
	NgramTable(spec models.TensorSpec) (*weights.NgramTable, error)
	// CheckNgram compares stored hash parameters, when the checkpoint has
	// them, with the computed ones.
	CheckNgram(layer int, multipliers, primes, offsets []int64) error
}

// pleLayer is what the host does for one PLE layer before each window: hash
// the tokens to table rows and gather them into the params buffer.
type pleLayer struct {
	layer int
	hash  *ngram.Table
	table *weights.NgramTable
}

// window is a compiled window graph.
type window struct {
	g *graph.Graph
	p backend.Program
}

// Model is a loaded model: its config, one program per window shape, and the
// memory they share.
type Model struct {
	Config   *models.Config
	mem      backend.Memory
	backend  backend.Backend
	weights  WeightStats
	inPlace  map[string]bool // tensors used where they lie in the mapped file
	shapes   []int           // ascending window row counts
	programs map[int]window
	mtp      map[int]window // the MTP draft head's windows, by rows
	// carry is the buffer a trunk window leaves its hidden rows in for the
	// MTP head, carryRow the bytes of one row.
	carry    string
	carryRow int
	stream   *streamer // nil: every routed expert resident
	ple      []pleLayer
	eos      int // resets n-gram context; -1 without PLE
	// ngramTime and ngramWindows: the host's time gathering n-gram rows
	// before windows (NgramGatherTime), and how many windows gathered.
	ngramTime, ngramWindows atomic.Int64
	// lane0 is the model's own lane (NewSession); lanes every lane, lane0
	// first; resident the lane whose state the model's memory holds, of
	// those sharing it (lanes that copy on a switch).
	lane0    *Lane
	lanes    []*Lane
	resident *Lane
	order    *orderSetting // SetOrder's, for lanes added later
	// warm holds the programs that have run once: a program's first run
	// pays one-time costs (pipeline first use, CUDA graph recording, pages
	// faulted in), so its time is not what the window costs; cold says
	// whether the last window run was such a first run.
	warmMu sync.Mutex
	warm   map[backend.Program]bool
	cold   bool
	// context is the most positions a session may use: the config's
	// runtime.context_length, or less when the run asked for less than
	// the artifact it runs was made for (LimitContext).
	context int
}

// LoadWith allocates memory for graphs (one per window shape, of model c) on
// backend be (cpu.Backend: the pure-Go kernels), fills the weights from src
// and binds every graph to it.
func LoadWith(c *models.Config, graphs []*graph.Graph, src WeightSource, be backend.Backend) (*Model, error) {
	if len(graphs) == 0 {
		return nil, errors.New("no window graphs to load")
	}
	return load(c, graphs, src, be, false)
}

// load allocates memory and binds the graphs; with streamed experts it
// leaves the experts to the streamer.
func load(c *models.Config, graphs []*graph.Graph, src WeightSource, be backend.Backend, streamed bool) (*Model, error) {
	if len(graphs) == 0 {
		return nil, errors.New("no window graphs to load")
	}
	var ip *inPlace
	var why string
	if b, ok := be.(backend.InPlace); ok && b.InPlaceWeights() {
		if ms, ok := src.(MappedSource); ok {
			var err error
			if ip, why, err = planInPlace(c, graphs, ms); err != nil {
				return nil, fmt.Errorf("model %s: %w", c.Name, err)
			}
		} else if _, asked := src.(interface{ copying() }); asked {
			why = "copying every weight was asked for"
		} else {
			why = "the weight source is not a mapped file"
		}
	} else {
		why = "the backend copies every weight"
	}
	if err := checkMemory(c, graphs); err != nil {
		return nil, err
	}
	mem, err := be.NewMemory(graphs...)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", c.Name, err)
	}
	m := &Model{Config: c, mem: mem, backend: be, programs: map[int]window{}, mtp: map[int]window{}, eos: -1,
		context: c.Runtime.ContextLength}
	m.weights.Why = why
	_, forks := be.(backend.Forker)
	m.lane0 = &Lane{m: m, mem: mem, programs: m.programs, mtp: m.mtp, copies: !forks}
	m.lanes, m.resident = []*Lane{m.lane0}, m.lane0
	if ip != nil {
		if err := ip.wrap(mem, &m.weights); err != nil {
			return nil, fmt.Errorf("model %s: %w", c.Name, err)
		}
		m.inPlace = ip.mapped
	}
	if err := m.fillWeights(graphs[0], src, streamed); err != nil {
		return nil, err
	}
	if res := mem.Buffer("residency"); res != nil && !streamed {
		for i := range backend.Uint32s(res) {
			backend.Uint32s(res)[i] = 1 // every expert resident: MoCE changes nothing
		}
	}
	if err := m.openNgram(src); err != nil {
		return nil, err
	}
	for _, g := range graphs {
		if g.Model != c.Name {
			return nil, fmt.Errorf("window graph is for model %q, not %q", g.Model, c.Name)
		}
		set := m.programs
		switch g.Kind {
		case graph.KindTrunk:
		case graph.KindMTP:
			set = m.mtp
		default:
			return nil, fmt.Errorf("model %s: window graph T=%d has unknown kind %q", c.Name, g.Rows, g.Kind)
		}
		if _, dup := set[g.Rows]; dup {
			return nil, fmt.Errorf("model %s: two %s window graphs with %d rows", c.Name, g.Kind, g.Rows)
		}
		p, err := be.Compile(g, mem)
		if err != nil {
			return nil, fmt.Errorf("model %s, %s window T=%d: %w", c.Name, g.Kind, g.Rows, err)
		}
		set[g.Rows] = window{g: g, p: p}
		if g.Kind == graph.KindTrunk {
			m.shapes = append(m.shapes, g.Rows)
		}
	}
	sort.Ints(m.shapes)
	m.carry, m.carryRow = carryBuffer(c, graphs)
	return m, nil
}

func (m *Model) fillWeights(g *graph.Graph, src WeightSource, streamed bool) error {
	specs := map[string]models.TensorSpec{}
	for _, s := range m.Config.Tensors() {
		specs[s.Name] = s
	}
	for _, t := range g.Tensors {
		spec, ok := specs[t.Name]
		if !ok {
			return fmt.Errorf("window graph places tensor %s, which model %s does not have", t.Name, m.Config.Name)
		}
		if t.Stride == 0 {
			if m.inPlace[t.Name] {
				continue // read where it lies in the mapped file
			}
			dst, err := m.tensorBytes(t, t.Offset, spec.Elements())
			if err != nil {
				return err
			}
			m.weights.Copied += int64(len(dst))
			if err := src.Read(spec, -1, t.Format, dst); err != nil {
				return err
			}
			continue
		}
		if streamed {
			continue // the streamer reads experts into the arena when a layer needs them
		}
		per := spec.Elements() / spec.Shape[0]
		for e := 0; e < spec.Shape[0]; e++ {
			dst, err := m.tensorBytes(t, t.Offset+int64(e)*t.Stride, per)
			if err != nil {
				return err
			}
			if err := src.Read(spec, e, t.Format, dst); err != nil {
				return err
			}
		}
	}
	if !streamed {
		m.mapExperts(g)
	}
	return nil
}

// openNgram prepares the host side of every PLE layer.
func (m *Model) openNgram(src WeightSource) error {
	a := &m.Config.Architecture
	if len(a.PLE.LayerIDs) == 0 {
		return nil
	}
	ns, ok := src.(NgramSource)
	if !ok {
		return fmt.Errorf("model %s has PLE layers, but its weight source cannot serve n-gram tables", m.Config.Name)
	}
	m.eos = a.EOSTokenIDs[0]
	specs := map[string]models.TensorSpec{}
	for _, s := range m.Config.Tensors() {
		specs[s.Name] = s
	}
	for l := 0; l < a.NumLayers; l++ {
		ord := a.PLE.Ordinal(l)
		if ord < 0 {
			continue
		}
		hash, err := ngram.New(a.NgramParams(ord))
		if err != nil {
			return fmt.Errorf("model %s, layer %d: %w", m.Config.Name, l, err)
		}
		if err := ns.CheckNgram(l, hash.Multipliers, hash.Primes, hash.Offsets); err != nil {
			return err
		}
		table, err := ns.NgramTable(specs[models.LayerTensor(l, "ple.table")])
		if err != nil {
			return err
		}
		m.ple = append(m.ple, pleLayer{layer: l, hash: hash, table: table})
	}
	return nil
}

// tensorBytes is the region of elems elements of t starting at off: whole
// rows, each t.RowStored() elements of t.Format (padded rows included).
// mapExperts points smap at the experts of fully resident layers: expert e
// of a layer sits at page (gate offset + e·stride) / ExpertPage of the
// experts buffer.
func (m *Model) mapExperts(g *graph.Graph) {
	E := m.Config.Architecture.MoE.NumExperts
	smap := backend.Uint32s(m.mem.Buffer("smap"))
	for l, t := range graph.ExpertGates(g.Tensors) {
		for e := 0; e < E; e++ {
			smap[l*E+e] = uint32((t.Offset + int64(e)*t.Stride) / graph.ExpertPage)
		}
	}
}

func (m *Model) tensorBytes(t graph.Tensor, off int64, elems int) ([]byte, error) {
	f, err := quantFormat(t.Format)
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	cols, stored := t.Shape[len(t.Shape)-1], t.RowStored()
	if stored%f.BlockElems != 0 || stored < cols {
		return nil, fmt.Errorf("tensor %s: rows of %d stored as %d elements, not whole %s blocks of %d", t.Name, cols, stored, f.Name, f.BlockElems)
	}
	b, err := m.mem.Bytes(graph.Range{Buffer: t.Buffer, Offset: off, Size: int64(elems/cols) * int64(f.Bytes(stored))})
	if err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return b, nil
}

// SetOrder sets how the dispatches of a barrier group run, for every shape,
// on a backend whose programs are backend.Ordered (the cpu backend); false
// when some program is not.
func (m *Model) SetOrder(o backend.Order, seed int64) bool {
	m.order = &orderSetting{o: o, seed: seed}
	all := true
	for _, l := range m.lanes {
		if l != m.lane0 && l.copies {
			continue // the model's own programs
		}
		for _, set := range []map[int]window{l.programs, l.mtp} {
			for _, w := range set {
				p, ok := w.p.(backend.Ordered)
				if ok {
					p.SetOrder(o, seed)
				}
				all = all && ok
			}
		}
	}
	return all
}

type orderSetting struct {
	o    backend.Order
	seed int64
}

// Weights says how much of the trunk's weights is used in place from the
// mapped model file and how much was copied.
func (m *Model) Weights() WeightStats { return m.weights }

// UsedInPlace reports whether the weight role name lies in the mapped file
// rather than in a buffer of the engine's.
func (m *Model) UsedInPlace(name string) bool { return m.inPlace[name] }

// Backend is the backend the model's windows run on.
func (m *Model) Backend() backend.Backend { return m.backend }

// HasMTP reports whether the model's MTP draft head is loaded.
func (m *Model) HasMTP() bool { return len(m.mtp) > 0 }

// Shapes lists the window row counts the model can run, ascending.
func (m *Model) Shapes() []int { return append([]int(nil), m.shapes...) }

// Context is the most tokens a session may hold: what the run asked for,
// at most the config's runtime.context_length (the KV caches' length).
func (m *Model) Context() int { return m.context }

// LimitContext lowers the context sessions may use to n tokens: a run that
// asked for a shorter context than the artifact it runs was made for keeps
// its own limit, though the caches are longer.
func (m *Model) LimitContext(n int) error {
	if n < 1 || n > m.Config.Runtime.ContextLength {
		return fmt.Errorf("model %s: a context of %d tokens: expected 1 to runtime.context_length = %d", m.Config.Name, n, m.Config.Runtime.ContextLength)
	}
	m.context = n
	return nil
}
