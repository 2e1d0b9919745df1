package engine

import (
	"cmp"
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
// is evicted last), and the next window's experts are read while one
// window runs. Between two segments of a window what its later
// dispatches read of its scratch and carry (and its params) is saved and
// put back; its state and caches are the
// session's, which each layer advances for the windows in their order, so
// every window sees exactly the state it sees when fed window by window:
// the logits are the same bit for bit.

// lmWindow is one window of a layer-major prefill.
type lmWindow struct {
	w      window
	seg    backend.SegmentedProgram
	tokens []int
	pos    int
	saved  []byte          // what it carries to its next segment, as the last one left it
	live   [][]graph.Range // what it carries across each boundary (Model.carried)
	ids    []int           // the experts its router chose at the last host point reached
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
	var out [][][]float32
	for first := true; len(chunks) > 0; first = false {
		if !first && turn != nil {
			if err := turn(); err != nil {
				return nil, err
			}
		}
		n := s.layerMajorGroup(chunks)
		part, err := s.layerMajorRun(chunks[:n], turn)
		if err != nil {
			s.m.markFailed()
			return nil, err
		}
		out, chunks = append(out, part...), chunks[n:]
	}
	return out, nil
}

// maxCarried bounds the bytes the windows of one layer-major group carry
// between their segments, all together: a longer prompt runs in groups of
// windows, each group through every layer before the next group.
var maxCarried int64 = 64 << 20

// layerMajorGroup is how many of chunks (at least one) prefill together:
// as many as carry at most maxCarried bytes between their segments.
func (s *Session) layerMajorGroup(chunks [][]int) int {
	total, pos := int64(0), s.pos
	for i, c := range chunks {
		w, err := s.program(s.lane.programs, c, pos)
		if err != nil {
			return max(i, 1) // the window reports it
		}
		most := int64(0)
		for _, rs := range s.m.carried(w.g) {
			n := int64(0)
			for _, r := range rs {
				n += r.Size
			}
			most = max(most, n)
		}
		if total += most; total > maxCarried && i > 0 {
			return i
		}
		pos += len(c)
	}
	return len(chunks)
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

	// save keeps what window lw's segments after the boundary read of its
	// scratch, params and carry before writing it; restore puts it back.
	save := func(lw *lmWindow, boundary int) {
		lw.saved = lw.saved[:0]
		for _, r := range lw.live[boundary] {
			lw.saved = append(lw.saved, mem.Buffer(r.Buffer)[r.Offset:r.End()]...)
		}
	}
	restore := func(lw *lmWindow, boundary int) {
		at := int64(0)
		for _, r := range lw.live[boundary] {
			at += int64(copy(mem.Buffer(r.Buffer)[r.Offset:r.End()], lw.saved[at:at+r.Size]))
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
		lw.live = m.carried(lw.w.g)
		save(lw, 0)
	}
	next := s.history
	s.history = hist

	hps := wins[0].w.g.HostPoints
	logits := make([][][]float32, len(wins))
	batchers := routedBatchers(wins)
	var batch backend.RoutedBatch // every pass's, reused
	for k := 0; k <= len(hps); k++ {
		if k > 0 && turn != nil {
			if err := turn(); err != nil {
				return nil, err
			}
			mem = s.mem() // another lane's window may have swapped the state
		}
		// finish runs window i's segment k (run, given the host point's
		// callback) and keeps what it yields: the router's choices, the
		// logits after the last segment, what it carries to the next.
		finish := func(i int, run func(host func(graph.HostPoint) error) error) error {
			lw := wins[i]
			err := run(func(hp graph.HostPoint) error {
				ids, _, err := m.routed(lw.w.g, hp)
				lw.ids = ids
				return err
			})
			if err != nil {
				return fmt.Errorf("model %s, window of %d rows at position %d: %w", m.Config.Name, len(lw.tokens), lw.pos, err)
			}
			if k == len(hps) {
				logits[i], err = s.logits(mem, lw.w, len(lw.tokens), lw.pos, false)
				return err
			}
			save(lw, k+1)
			if batchers != nil && batchers[i].Routed(k+1) {
				// The next layer's experts run batched once every window
				// reached them: read this window's ahead into spare slots.
				m.stream.PrefetchSpare(hps[k].Layer, lw.ids, hps[k].Layer, nil)
			}
			return nil
		}
		if k > 0 && batchers != nil && batchers[0].Routed(k) {
			if err := s.routedPass(wins, batchers, k, &batch, restore, finish); err != nil {
				return nil, err
			}
			continue
		}
		var uses *nextUses
		if k > 0 {
			uses = newNextUses(m.stream.arena.Experts, wins)
		}
		for i, lw := range wins {
			restore(lw, k)
			if k > 0 {
				hot, err := m.ensureRanked(hps[k-1].Layer, i, wins, uses)
				if err != nil {
					return nil, fmt.Errorf("model %s, window of %d rows at position %d, layer %d: %w", m.Config.Name, len(lw.tokens), lw.pos, hps[k-1].Layer, err)
				}
				// The experts the next window needs next are known: read
				// them while this one runs, into the slots of experts no
				// later window needs (its own are pinned).
				switch {
				case i+1 < len(wins):
					m.stream.PrefetchSpare(hps[k-1].Layer, wins[i+1].ids, hps[k-1].Layer, hot)
				case k < len(hps) && i > 0 && batchers == nil:
					// The first window's at the next layer (its router ran
					// in this pass: it is not this window).
					m.stream.PrefetchSpare(hps[k].Layer, wins[0].ids, hps[k-1].Layer, nil)
				}
			}
			if err := finish(i, func(host func(graph.HostPoint) error) error { return lw.seg.RunSegment(k, host) }); err != nil {
				return nil, err
			}
		}
	}
	s.pos = pos
	s.history = next
	return logits, nil
}

// routedBatchers is the windows' programs as backend.RoutedBatchers, nil
// unless every one is (their routed experts then run batched over the
// windows: routedPass).
func routedBatchers(wins []*lmWindow) []backend.RoutedBatcher {
	out := make([]backend.RoutedBatcher, len(wins))
	for i, lw := range wins {
		rb, ok := lw.seg.(backend.RoutedBatcher)
		if !ok {
			return nil
		}
		out[i] = rb
	}
	return out
}

// maxRouted bounds the bytes of one routed batch's expert values (a row's
// top-k outputs, kept until its window's segment runs): a longer prompt's
// windows run a layer's experts in several batches.
var maxRouted int64 = 64 << 20

// routedPass is pass k (k > 0) of a layer-major prefill with the routed
// experts of the layer whose router ended segment k-1 taken out of the
// windows' segments: their rows gathered in batches (as many windows as
// maxRouted allows, the whole prompt mostly), each batch's experts read
// through the arena a half-arena group at a time (the next group read
// while one group's experts run) and run for all the batch's rows routed
// to them, then each window's segment k run with those values. Each
// expert is read once a batch and meets all of its rows at once, where a
// window's segment gives it about one (multi-row kernels instead of
// single-row ones); the sums within an expert's dot may then group
// differently than in a window's own dispatch (float32 rounding; exact
// formats such as float weights give the same bits).
func (s *Session) routedPass(wins []*lmWindow, rbs []backend.RoutedBatcher, k int, b *backend.RoutedBatch, restore func(*lmWindow, int), finish func(int, func(func(graph.HostPoint) error) error) error) error {
	m := s.m
	perChoice := int64(m.Config.Architecture.HiddenSize) * 4 // bytes of one choice's values
	layer := wins[0].w.g.HostPoints[k-1].Layer
	for lo := 0; lo < len(wins); {
		b.Reset()
		row0 := []int{}
		hi, bytes := lo, int64(0)
		for ; hi < len(wins); hi++ {
			lw := wins[hi]
			need := int64(len(lw.ids)) * perChoice
			if hi > lo && bytes+need > maxRouted {
				break
			}
			bytes += need
			restore(lw, k)
			r0, err := rbs[hi].ReadRouted(k, b)
			if err != nil {
				return fmt.Errorf("model %s, window of %d rows at position %d, layer %d: %w", m.Config.Name, len(lw.tokens), lw.pos, layer, err)
			}
			row0 = append(row0, r0)
		}
		m.stream.batches++
		m.stream.batchRows += b.Rows
		chunks := m.routedChunks(layer, b.IDs)
		only := make([]bool, m.stream.arena.Experts)
		for c, chunk := range chunks {
			var later []int
			for _, rest := range chunks[c+1:] {
				later = append(later, rest...)
			}
			if err := m.ensureChunk(layer, chunk, later); err != nil {
				return fmt.Errorf("model %s, layer %d: %w", m.Config.Name, layer, err)
			}
			if c+1 < len(chunks) {
				m.stream.PrefetchSpare(layer, chunks[c+1], layer, later)
			}
			clear(only)
			for _, e := range chunk {
				only[e] = true
			}
			if err := rbs[lo].RunRouted(k, b, only); err != nil {
				return fmt.Errorf("model %s, layer %d: %w", m.Config.Name, layer, err)
			}
		}
		m.stream.Release() // the batch's values hold what the windows need of the layer's experts
		for i := lo; i < hi; i++ {
			restore(wins[i], k)
			err := finish(i, func(host func(graph.HostPoint) error) error {
				return rbs[i].RunSegmentRouted(k, b, row0[i-lo], host)
			})
			if err != nil {
				return err
			}
		}
		lo = hi
	}
	return nil
}

// routedChunks cuts the experts ids route to at layer (in the layer's
// range) into the groups a routed batch makes resident in turn: those
// resident now (or being read) first, then the rest, each in the order the
// windows' routers chose them (the order the windows' read-aheads were
// issued in, so the first group's reads land first), at most half the
// arena a group, so the next group is read while one runs.
func (m *Model) routedChunks(layer int, ids []uint32) [][]int {
	E := m.stream.arena.Experts
	seen := make([]bool, E)
	var resident, missing []int
	for _, id := range ids {
		e := int(id)
		if e >= E || seen[e] {
			continue
		}
		seen[e] = true
		if m.stream.Held(layer, e) {
			resident = append(resident, e)
		} else {
			missing = append(missing, e)
		}
	}
	all := append(resident, missing...)
	size := max(m.stream.arena.Capacity()/2, 1)
	var out [][]int
	for len(all) > 0 {
		n := min(size, len(all))
		out = append(out, all[:n:n])
		all = all[n:]
	}
	return out
}

// ensureChunk makes a group of a layer's experts resident for a routed
// batch and ranks the layer's experts for eviction: the group's own first
// once unpinned (the batch is done with them), later groups' last.
func (m *Model) ensureChunk(layer int, chunk, later []int) error {
	start := time.Now()
	defer func() {
		m.stream.hostPoints++
		m.stream.hostTime += time.Since(start)
	}()
	if err := m.stream.Ensure(layer, chunk); err != nil {
		return err
	}
	m.stream.Rank(layer, chunk, later)
	return nil
}

// nextUses knows, during a pass over one layer, which window of the group
// next routes to each expert: uses[e] lists the uses of e in order (the
// window, and where e first appears among its choices), at[e] the first
// not yet passed.
type nextUses struct {
	uses [][][2]int
	at   []int
}

func newNextUses(experts int, wins []*lmWindow) *nextUses {
	n := &nextUses{uses: make([][][2]int, experts), at: make([]int, experts)}
	for i, lw := range wins {
		for j, e := range lw.ids {
			if e >= 0 && e < experts && (len(n.uses[e]) == 0 || n.uses[e][len(n.uses[e])-1][0] != i) {
				n.uses[e] = append(n.uses[e], [2]int{i, j})
			}
		}
	}
	return n
}

// after returns, at window i of the pass, the experts a later window needs,
// the soonest needed first (by window, then by the window's choices), and
// those of window i that no later one needs.
func (n *nextUses) after(i int, ids []int) (hot, cold []int) {
	next := make([][2]int, len(n.uses))
	for e, u := range n.uses {
		for n.at[e] < len(u) && u[n.at[e]][0] <= i {
			n.at[e]++
		}
		if n.at[e] < len(u) {
			next[e] = u[n.at[e]]
			hot = append(hot, e)
		}
	}
	slices.SortFunc(hot, func(a, b int) int {
		return cmp.Or(cmp.Compare(next[a][0], next[b][0]), cmp.Compare(next[a][1], next[b][1]))
	})
	for _, e := range ids {
		if e >= 0 && e < len(n.uses) && n.at[e] == len(n.uses[e]) && !slices.Contains(cold, e) {
			cold = append(cold, e)
		}
	}
	return hot, cold
}

// ensureRanked makes the experts window i of the pass over layer routes to
// resident for its segment, then ranks the layer's experts for eviction by
// the next window that needs each (none: evicted first). It returns the
// experts later windows need, the soonest first.
func (m *Model) ensureRanked(layer, i int, wins []*lmWindow, uses *nextUses) ([]int, error) {
	start := time.Now()
	defer func() {
		m.stream.hostPoints++
		m.stream.hostTime += time.Since(start)
	}()
	if err := m.stream.Ensure(layer, wins[i].ids); err != nil {
		return nil, err
	}
	hot, cold := uses.after(i, wins[i].ids)
	m.stream.Rank(layer, cold, hot)
	return hot, nil
}

// carried is, for each boundary of g's segments (before the first, then
// after each host point's router), the ranges of its scratch, params and
// carry that the dispatches after it read before they write them: what a
// window carries across the boundary (the residual stream, the router's
// choices, a hyper-connection model's streams, the params later layers
// read, such as a PLE layer's n-gram rows), a small part of the scratch,
// and the params' row count, which the host reads at host points. Cached
// per graph.
func (m *Model) carried(g *graph.Graph) [][]graph.Range {
	m.stream.mu.Lock()
	defer m.stream.mu.Unlock()
	if c, ok := m.stream.carried[g]; ok {
		return c
	}
	kind := map[string]string{}
	for _, b := range g.Buffers {
		kind[b.Name] = b.Kind
	}
	bounds := []int{0}
	for _, hp := range g.HostPoints {
		bounds = append(bounds, hp.After+1)
	}
	var out [][]graph.Range
	for _, from := range bounds {
		written, live := map[string]spans{}, map[string]spans{}
		for _, d := range g.Dispatches[from:] {
			for _, r := range d.Reads {
				if !savedKinds[kind[r.Buffer]] {
					continue
				}
				lo, hi := r.Offset, r.End()
				if r.Offset == 0 && r.Size == 0 {
					lo, hi = 0, bufferSize(g, r.Buffer) // all of it
				}
				for _, p := range written[r.Buffer].missing(lo, hi) {
					live[r.Buffer] = live[r.Buffer].add(p[0], p[1])
				}
			}
			for _, w := range d.Writes {
				if savedKinds[kind[w.Buffer]] {
					written[w.Buffer] = written[w.Buffer].add(w.Offset, w.End())
				}
			}
		}
		// The host reads the live row count at host points.
		rowsWord := int64(4 * graph.ParamRowsWord)
		live[graph.ParamsBuffer] = live[graph.ParamsBuffer].add(rowsWord, rowsWord+4)
		var rs []graph.Range
		for _, b := range g.Buffers {
			if savedKinds[b.Kind] {
				for _, p := range live[b.Name] {
					rs = append(rs, graph.Range{Buffer: b.Name, Offset: p[0], Size: p[1] - p[0]})
				}
			}
		}
		out = append(out, rs)
	}
	if m.stream.carried == nil {
		m.stream.carried = map[*graph.Graph][][]graph.Range{}
	}
	m.stream.carried[g] = out
	return out
}

func bufferSize(g *graph.Graph, name string) int64 {
	b, _ := g.Buffer(name)
	return b.Size
}

// spans are disjoint byte ranges [lo, hi), ascending.
type spans [][2]int64

// add is s with [lo, hi) added.
func (s spans) add(lo, hi int64) spans {
	if lo >= hi {
		return s
	}
	var out spans
	for _, p := range s {
		switch {
		case p[1] < lo || p[0] > hi:
			out = append(out, p)
		default: // overlapping or touching: merge
			lo, hi = min(lo, p[0]), max(hi, p[1])
		}
	}
	out = append(out, [2]int64{lo, hi})
	slices.SortFunc(out, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	return out
}

// missing is the parts of [lo, hi) that s does not cover.
func (s spans) missing(lo, hi int64) spans {
	var out spans
	for _, p := range s {
		if p[1] <= lo || p[0] >= hi {
			continue
		}
		if p[0] > lo {
			out = append(out, [2]int64{lo, p[0]})
		}
		lo = max(lo, p[1])
	}
	if lo < hi {
		out = append(out, [2]int64{lo, hi})
	}
	return out
}
