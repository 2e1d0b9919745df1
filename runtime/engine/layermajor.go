package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Layer-major prefill. With streamed experts a prompt of several windows,
// fed window by window, reads each layer's experts once per window: every
// window runs every layer, and the arena (smaller than a layer's experts)
// has evicted a layer's experts again by the time the next window reaches
// it. Layer-major prefill runs the windows' segments (the dispatches
// between two host points: one layer's routed experts, the next layer's
// mixer and router) segment by segment: segment k of every window in
// order, then segment k+1. Only one layer's experts compete for the arena
// while a segment runs for all windows, and the routing of every window at
// that layer is known before the first of them needs its experts, so the
// arena keeps them in Belady's order (the expert the soonest window needs
// is evicted last). Between two segments of a window its scratch, params
// and carry are saved and put back; its state and caches are the
// session's, which each layer advances for the windows in their order, so
// every window sees exactly the state it sees when fed window by window:
// the logits are the same bit for bit.

// lmWindow is one window of a layer-major prefill.
type lmWindow struct {
	w      window
	seg    backend.SegmentedProgram
	tokens []int
	pos    int
	saved  [][]byte // its buffers of savedKinds, as the last segment left them
	ids    []int    // the experts its router chose at the last host point reached
}

// savedKinds are the buffers one window carries from segment to segment.
var savedKinds = map[string]bool{graph.KindScratch: true, graph.KindParams: true, graph.KindCarry: true}

// layerMajor says whether chunks (consecutive windows of a prompt from the
// session's position) can prefill layer by layer: the experts stream, the
// windows' programs run in segments with the same host points, and routing
// does not see the arena's residency (MoCE), which differs from window to
// window when fed window by window.
func (s *Session) layerMajor(chunks [][]int) bool {
	m := s.m
	if m.stream == nil || m.stream.windowMajor || len(chunks) < 2 || m.mem.Buffer("residency") != nil {
		return false
	}
	var first *graph.Graph
	pos := s.pos
	for _, c := range chunks {
		w, err := s.program(s.lane.programs, c, pos)
		if err != nil {
			return false // the windows report it
		}
		pos += len(c)
		if _, ok := w.p.(backend.SegmentedProgram); !ok || len(w.g.HostPoints) == 0 {
			return false
		}
		if first == nil {
			first = w.g
			continue
		}
		if !slices.EqualFunc(w.g.HostPoints, first.HostPoints, func(a, b graph.HostPoint) bool { return a.Layer == b.Layer }) {
			return false
		}
	}
	return true
}

// prefillLayerMajor feeds chunks layer by layer (see above) and returns
// each chunk's logits, as Window returns them. turn, when set, is called
// between two layers' segments (another session may run windows there).
// It fails as a window does: the session is then unusable.
func (s *Session) prefillLayerMajor(chunks [][]int, turn func() error) ([][][]float32, error) {
	out, err := s.layerMajorRun(chunks, turn)
	if err != nil {
		s.m.markFailed()
	}
	return out, err
}

func (s *Session) layerMajorRun(chunks [][]int, turn func() error) ([][][]float32, error) {
	m := s.m
	mem := s.mem()
	wins := make([]*lmWindow, len(chunks))
	pos := s.pos
	for i, c := range chunks {
		w, err := s.program(s.lane.programs, c, pos)
		if err != nil {
			return nil, err
		}
		wins[i] = &lmWindow{w: w, seg: w.p.(backend.SegmentedProgram), tokens: c, pos: pos}
		pos += len(c)
	}
	m.warmMu.Lock()
	m.cold = false
	for _, lw := range wins {
		if !m.warm[lw.w.p] {
			m.cold = true
			if m.warm == nil {
				m.warm = map[backend.Program]bool{}
			}
			m.warm[lw.w.p] = true
		}
	}
	m.warmMu.Unlock()
	m.stream.BeginWindow()

	save := func(lw *lmWindow) {
		i := 0
		for _, b := range lw.w.g.Buffers {
			if !savedKinds[b.Kind] {
				continue
			}
			if i == len(lw.saved) {
				lw.saved = append(lw.saved, make([]byte, b.Size))
			}
			copy(lw.saved[i], mem.Buffer(b.Name)[:b.Size])
			i++
		}
	}
	restore := func(lw *lmWindow) {
		i := 0
		for _, b := range lw.w.g.Buffers {
			if savedKinds[b.Kind] {
				copy(mem.Buffer(b.Name)[:b.Size], lw.saved[i])
				i++
			}
		}
	}
	// Each window's params (and n-gram rows) in order, as its own window
	// would write them; its scratch starts as the one before left it.
	hist := s.history
	for _, lw := range wins {
		if err := s.writeParams(mem, lw.w.g, lw.tokens, lw.pos); err != nil {
			return nil, err
		}
		next, err := s.gatherNgrams(mem, lw.w.g, lw.tokens)
		if err != nil {
			s.history = hist
			return nil, err
		}
		s.history = next
		save(lw)
	}
	next := s.history
	s.history = hist

	hps := wins[0].w.g.HostPoints
	logits := make([][][]float32, len(wins))
	for k := 0; k <= len(hps); k++ {
		if k > 0 && turn != nil {
			if err := turn(); err != nil {
				return nil, err
			}
			mem = s.mem() // another lane's window may have swapped the state
		}
		for i, lw := range wins {
			if len(wins) > 1 {
				restore(lw)
			}
			if k > 0 {
				if err := m.ensureRanked(hps[k-1].Layer, wins[i:]); err != nil {
					return nil, fmt.Errorf("model %s, window of %d rows at position %d, layer %d: %w", m.Config.Name, len(lw.tokens), lw.pos, hps[k-1].Layer, err)
				}
			}
			err := lw.seg.RunSegment(k, func(hp graph.HostPoint) error {
				ids, _, err := m.routed(lw.w.g, hp)
				lw.ids = ids
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("model %s, window of %d rows at position %d: %w", m.Config.Name, len(lw.tokens), lw.pos, err)
			}
			if k == len(hps) {
				if logits[i], err = s.logits(mem, lw.w, len(lw.tokens), lw.pos, false); err != nil {
					return nil, err
				}
				continue
			}
			save(lw)
		}
	}
	s.pos = pos
	s.history = next
	return logits, nil
}

// ensureRanked makes the experts wins[0]'s router chose at layer resident
// for its segment, then ranks the layer's experts for eviction by the next
// of wins[1:] that needs each (none: evicted first).
func (m *Model) ensureRanked(layer int, wins []*lmWindow) error {
	start := time.Now()
	defer func() {
		m.stream.hostPoints++
		m.stream.hostTime += time.Since(start)
	}()
	if err := m.stream.Ensure(layer, wins[0].ids); err != nil {
		return err
	}
	nextUse := map[int]int{}
	var hot []int
	for i, lw := range wins[1:] {
		for _, e := range lw.ids {
			if _, ok := nextUse[e]; !ok {
				nextUse[e] = i
				hot = append(hot, e) // in order of next use
			}
		}
	}
	var cold []int
	for _, e := range wins[0].ids {
		if _, ok := nextUse[e]; !ok && !slices.Contains(cold, e) {
			cold = append(cold, e)
		}
	}
	m.stream.Rank(layer, cold, hot)
	return nil
}
