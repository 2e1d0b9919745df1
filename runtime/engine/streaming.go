package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sync"
	"time"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/engine/stream"
)

// Streaming keeps only Slots routed experts resident, reading the others from
// Reader (the .experts pack) at each layer's host point. Without MoCE the
// tokens are exactly those of a fully resident model.
type Streaming struct {
	Slots   int           // arena capacity, in experts
	Reader  stream.Reader // nil: read experts through the weight source
	Options stream.Options
	// Wrap, when set, wraps the reader (fault or delay injection in tests
	// and diagnostics).
	Wrap func(stream.Reader) stream.Reader
	// History is the usage-history file (next to the pack): read at load to
	// seed the arena, written back at Close. "" or "-" keeps no history.
	History string
	// Warn reports a history that could not be used (it is then ignored).
	Warn func(error)
	// EveryLayer stops the GPU for the host at every MoE layer even on a
	// backend whose GPU can check residency itself and stop only where a
	// layer misses (backend.CheckedProgram): the baseline of that check.
	// Windows that read ahead always stop at every layer (checkedWindow).
	EveryLayer bool
	// WindowMajor feeds a prompt of several windows window by window, each
	// through every layer, instead of layer by layer (layermajor.go): the
	// baseline of layer-major prefill. The tokens are the same.
	WindowMajor bool
}

// streamer is a model's streaming state.
type streamer struct {
	*stream.Streamer
	arena   *stream.Arena
	history string
	// failed is set by a window that failed: the history of a failed run
	// is not saved (it may be half a window's hits, and the run is retried).
	failed bool
	// hostPoints and hostTime count the windows' stops for the host.
	hostPoints int
	hostTime   time.Duration
	ranOn      int // host points a checked window passed without waiting
	// batches and batchRows count the routed batches of layer-major
	// prefill (Stats.Batches) and the rows they ran for.
	batches, batchRows int
	// everyLayer keeps windows unchecked (Streaming.EveryLayer); checks
	// are the host points' checks by graph.
	everyLayer  bool
	windowMajor bool // Streaming.WindowMajor
	checks      map[*graph.Graph][]backend.HostCheck
	// mu guards carried: what a window carries between its segments, by
	// graph (layer-major prefill; lanes of a server share the model).
	mu      sync.Mutex
	carried map[*graph.Graph][][]graph.Range
}

// LoadStreaming is LoadWith with the routed experts streamed through an arena
// of st.Slots experts instead of all loaded.
func LoadStreaming(c *models.Config, graphs []*graph.Graph, src WeightSource, be backend.Backend, st Streaming) (*Model, error) {
	layout, err := expertLayout(c, graphs[0])
	if err != nil {
		return nil, err
	}
	if st.Slots < 1 {
		return nil, fmt.Errorf("expert arena of %d slots: expected at least 1", st.Slots)
	}
	if all := layout.layers * c.Architecture.MoE.NumExperts; st.Slots > all {
		return nil, fmt.Errorf("expert arena of %d slots: model %s has only %d routed experts (%d MoE layers × %d); an arena of all of them is the resident model (no arena)",
			st.Slots, c.Name, all, layout.layers, c.Architecture.MoE.NumExperts)
	}
	// The arena replaces the full experts buffer: size it to the slots.
	for _, g := range graphs {
		for i := range g.Buffers {
			if g.Buffers[i].Kind == graph.KindExperts {
				g.Buffers[i].Size = int64(st.Slots) * layout.slotBytes
			}
		}
	}
	m, err := load(c, graphs, src, be, true)
	if err != nil {
		return nil, err
	}
	reader := st.Reader
	if reader == nil {
		reader = &sourceReader{src: src, layout: layout}
	}
	if st.Wrap != nil {
		reader = st.Wrap(reader)
	}
	arena, err := stream.NewArenaIn(layout.layers, c.Architecture.MoE.NumExperts, int(layout.slotBytes),
		[][]byte{m.mem.Buffer("experts")}, backend.Uint32s(m.mem.Buffer("smap")))
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", c.Name, err)
	}
	if st.History == "-" {
		st.History = ""
	}
	m.stream = &streamer{Streamer: stream.NewStreamer(arena, reader, st.Options), arena: arena, history: st.History, everyLayer: st.EveryLayer, windowMajor: st.WindowMajor}
	if st.History != "" {
		u, err := stream.LoadUsage(st.History, layout.layers, c.Architecture.MoE.NumExperts)
		switch {
		case err == nil:
			// Blend: the history once it covers 1k windows, else what it has.
			m.stream.Fill(u, stream.FillOrder(u, nil, 0.7, 1000))
		case !errors.Is(err, fs.ErrNotExist) && st.Warn != nil:
			st.Warn(fmt.Errorf("ignoring the expert usage history: %w", err))
		}
	}
	return m, nil
}

// Close stops the model's expert streaming, if any, saving its usage
// history, and closes its backend when that is an io.Closer.
func (m *Model) Close() error {
	for _, p := range m.ple {
		p.table.WaitPrefetches() // its rows lie in a mapping the caller closes next
	}
	var errs []error
	if m.stream != nil {
		if m.stream.history != "" && !m.stream.failed {
			errs = append(errs, m.stream.Save(m.stream.history))
		}
		m.stream.Streamer.Close()
	}
	if c, ok := m.backend.(io.Closer); ok {
		errs = append(errs, c.Close())
		m.backend = nil
	}
	return errors.Join(errs...)
}

// StreamTrace is the order experts were needed in (with Options.Trace).
func (m *Model) StreamTrace() []int {
	if m.stream == nil {
		return nil
	}
	return m.stream.Trace()
}

// StreamStats is the streaming telemetry (zero without streaming).
func (m *Model) StreamStats() stream.Stats {
	if m.stream == nil {
		return stream.Stats{}
	}
	st := m.stream.Stats()
	st.HostPoints, st.HostTime, st.RanOn = m.stream.hostPoints, m.stream.hostTime, m.stream.ranOn
	st.Batches, st.BatchRows = m.stream.batches, m.stream.batchRows
	return st
}

// ProbeReads measures the pack's raw read rate for expert reads (stream.
// Streamer.Probe over n experts); ok false without streaming.
func (m *Model) ProbeReads(n int) (p stream.Probe, ok bool, err error) {
	if m.stream == nil {
		return stream.Probe{}, false, nil
	}
	p, err = m.stream.Probe(n)
	return p, true, err
}

// hostPoint makes the experts a layer's router chose resident (the GPU
// waits meanwhile).
func (m *Model) hostPoint(g *graph.Graph, hp graph.HostPoint) error {
	start := time.Now()
	defer func() {
		m.stream.hostPoints++
		m.stream.hostTime += time.Since(start)
	}()
	ids, preds, err := m.routed(g, hp)
	if err != nil {
		return err
	}
	return m.makeResident(hp.Layer, ids, preds, false)
}

// routed reads, at a host point, the experts the layer's router chose for
// the window's live rows and the next layer's predicted ones (hp.Reads).
func (m *Model) routed(g *graph.Graph, hp graph.HostPoint) (ids []int, preds [][]int, err error) {
	router := &g.Dispatches[hp.After]
	idr, ok := router.Arg("ids")
	if !ok {
		return nil, nil, fmt.Errorf("host point of layer %d follows %s, which binds no ids", hp.Layer, router.Kernel)
	}
	b, err := m.mem.Bytes(idr.Range)
	if err != nil {
		return nil, nil, err
	}
	rows, _ := router.Const(graph.ConstRows)
	topK, _ := router.Const(graph.ConstTopK)
	live := min(int(binary.LittleEndian.Uint32(m.mem.Buffer(graph.ParamsBuffer)[4*graph.ParamRowsWord:])), int(rows))
	read := func(b []byte) []int {
		out := make([]int, 0, live*int(topK))
		for i := 0; i < live*int(topK); i++ {
			out = append(out, int(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return out
	}
	for _, r := range hp.Reads {
		pb, err := m.mem.Bytes(r)
		if err != nil {
			return nil, nil, err
		}
		preds = append(preds, read(pb))
	}
	return read(b), preds, nil
}

// checkedHostPoint is hostPoint on a checked run: the GPU copied the ids
// out and, where it found them all resident, runs on without waiting.
func (m *Model) checkedHostPoint(hp graph.HostPoint, seen backend.HostSeen) error {
	start := time.Now()
	defer func() {
		// Host time counts at every point (the stalls do), the GPU
		// waiting or not.
		m.stream.hostTime += time.Since(start)
		if seen.Resident {
			m.stream.ranOn++
		} else {
			m.stream.hostPoints++
		}
	}()
	ints := func(v []uint32) []int {
		out := make([]int, len(v))
		for i, x := range v {
			out[i] = int(x)
		}
		return out
	}
	var preds [][]int
	for _, r := range seen.Reads {
		preds = append(preds, ints(r))
	}
	return m.makeResident(hp.Layer, ints(seen.IDs), preds, seen.Resident)
}

// makeResident makes a layer's routed experts resident and reads ahead the
// next layer's predicted ones. ranOn says the GPU found the experts
// resident and did not wait: a miss here would mean the residency changed
// under a running layer (an error, never a silent one).
func (m *Model) makeResident(layer int, ids []int, preds [][]int, ranOn bool) error {
	var before stream.Stats
	if ranOn { // the check below is only for points the GPU ran past
		before = m.stream.Stats()
	}
	if err := m.stream.Ensure(layer, ids); err != nil {
		return err
	}
	if ranOn {
		if after := m.stream.Stats(); after.Misses != before.Misses || after.Late != before.Late {
			return fmt.Errorf("layer %d: the GPU found its experts resident and ran on, but the host had to read %d of them: the residency changed under a running layer",
				layer, after.Misses-before.Misses+after.Late-before.Late)
		}
	}
	// The next layer's predicted experts, read ahead while this one runs.
	for _, p := range preds {
		m.stream.Prefetch(layer+1, p)
	}
	return nil
}

// checkedWindow says whether g runs checked: the GPU checks residency at
// each host point and waits only where an expert is missing. Not with
// read-ahead: the host, behind the GPU where it ran on, would claim slots
// for the read-aheads while the GPU may already run a later layer on one
// of them. Keeping such claims to layers the window has passed is safe but
// churns the early layers (on the 48-layer model, decode fell from 19.9
// to 9.8 tok/s); bounding the GPU's lead to one layer (docs/laptop.md)
// would keep the plain claims. Until then those windows stop everywhere.
func (m *Model) checkedWindow(g *graph.Graph) bool {
	if m.stream.everyLayer {
		return false
	}
	for _, hp := range g.HostPoints {
		if len(hp.Reads) > 0 {
			return false
		}
	}
	return true
}

// hostChecks describes g's host points for a checked run (cached per
// graph).
func (m *Model) hostChecks(g *graph.Graph) ([]backend.HostCheck, error) {
	if c, ok := m.stream.checks[g]; ok {
		return c, nil
	}
	var out []backend.HostCheck
	E := m.stream.arena.Experts
	for _, hp := range g.HostPoints {
		router := &g.Dispatches[hp.After]
		ids, ok := router.Arg("ids")
		if !ok {
			return nil, fmt.Errorf("host point of layer %d follows %s, which binds no ids", hp.Layer, router.Kernel)
		}
		rows, _ := router.Const(graph.ConstRows)
		topK, _ := router.Const(graph.ConstTopK)
		out = append(out, backend.HostCheck{IDs: ids.Range, PerRow: int(topK), Rows: int(rows), Reads: hp.Reads, Miss: stream.Miss,
			Smap: graph.Range{Buffer: "smap", Offset: int64(4 * hp.Layer * E), Size: int64(4 * E)}})
	}
	if m.stream.checks == nil {
		m.stream.checks = map[*graph.Graph][]backend.HostCheck{}
	}
	m.stream.checks[g] = out
	return out, nil
}

// publishResidency writes the routing-visible residency (what MoCE may see)
// into the residency buffer; it changes only between windows.
func (m *Model) publishResidency() {
	buf := m.mem.Buffer("residency")
	if buf == nil {
		return
	}
	res := backend.Uint32s(buf)
	for l := 0; l < m.stream.arena.Layers; l++ {
		for e, v := range m.stream.Visible(l) {
			res[l*m.stream.arena.Experts+e] = uint32(boolToInt(v))
		}
	}
}

func boolToInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// expertParts is where one MoE layer's gate, up and down sit inside an
// expert's block, and the specs to read them.
type expertParts struct {
	specs   [3]models.TensorSpec
	formats [3]string
	offsets [3]int64
	sizes   [3]int64
}

// expertLayouts describes every MoE layer's expert block.
type expertLayouts struct {
	layers    int
	slotBytes int64
	parts     []expertParts // by smap layer
}

func expertLayout(c *models.Config, g *graph.Graph) (*expertLayouts, error) {
	specs := map[string]models.TensorSpec{}
	for _, s := range c.Tensors() {
		specs[s.Name] = s
	}
	byName := map[string]graph.Tensor{}
	for _, t := range g.Tensors {
		byName[t.Name] = t
	}
	a := &c.Architecture
	out := &expertLayouts{layers: a.NumLayers + a.MTP.NumLayers}
	for l := 0; l < out.layers; l++ {
		prefix := fmt.Sprintf("layers.%d.", l)
		if l >= a.NumLayers {
			prefix = models.MTPLayerPrefix(l - a.NumLayers)
		}
		var p expertParts
		for j, part := range []string{"gate", "up", "down"} {
			t, ok := byName[prefix+"moe.experts."+part]
			if !ok {
				return nil, fmt.Errorf("window graph has no placement for %smoe.experts.%s", prefix, part)
			}
			if j == 0 {
				if out.slotBytes == 0 {
					out.slotBytes = t.Stride
				} else if t.Stride != out.slotBytes {
					return nil, fmt.Errorf("expert blocks of %d and %d bytes: one arena needs one slot size", out.slotBytes, t.Stride)
				}
			}
			p.specs[j], p.formats[j] = specs[t.Name], t.Format
			p.offsets[j] = t.Offset - byName[prefix+"moe.experts.gate"].Offset
			f, err := quantFormat(t.Format)
			if err != nil {
				return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
			}
			spec := specs[t.Name]
			p.sizes[j] = int64(spec.Elements()/spec.Shape[0]/t.Shape[len(t.Shape)-1]) * int64(f.Bytes(t.RowStored()))
		}
		out.parts = append(out.parts, p)
	}
	if out.slotBytes%graph.ExpertPage != 0 {
		return nil, fmt.Errorf("expert blocks of %d bytes are not whole %d-byte pages", out.slotBytes, graph.ExpertPage)
	}
	return out, nil
}

// sourceReader reads experts through a WeightSource (an HF checkpoint or a
// GGUF without a pack): it assembles the block the pack would hold.
// Weight sources are not safe for concurrent use, so reads are serialized:
// this path serves checkpoints without a pack, where speed is not the point.
type sourceReader struct {
	mu     sync.Mutex
	src    WeightSource
	layout *expertLayouts
}

func (r *sourceReader) ReadExpert(layer, expert, off int, dst []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	block := make([]byte, r.layout.slotBytes)
	p := r.layout.parts[layer]
	for j := range p.specs {
		if err := r.src.Read(p.specs[j], expert, p.formats[j], block[p.offsets[j]:p.offsets[j]+p.sizes[j]]); err != nil {
			return err
		}
	}
	copy(dst, block[off:])
	return nil
}
