package engine

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// laneKinds are the buffers that hold one sequence: what a lane owns. The
// weights, experts (and the streaming arena with its smap and residency),
// scratch, params and carry are shared: windows never run concurrently, and
// a window's carry is read by the MTP windows of the same decode step.
var laneKinds = []string{graph.KindState, graph.KindCache}

// Lane is a place for one sequence's state (the KV and index caches, the
// recurrent and conv state) over the model's weights: the model's own lane
// (Model.NewSession) and any from NewLane. Sessions of different lanes keep
// their state apart, so a server can run several sequences by taking turns
// window by window; windows still run one at a time, never concurrently.
//
// On a backend.Forker (the cpu backend) a lane has buffers of its own and
// programs compiled against them, and switching lanes copies nothing. On
// other backends the lanes share the model's buffers and a switch swaps the
// state: the lane that held them is copied out, the next one's copied in
// (Copies).
type Lane struct {
	m        *Model
	mem      backend.Memory
	programs map[int]window
	mtp      map[int]window
	copies   bool // the lanes share the model's memory and swap state
	// parked holds the state of a lane sharing the model's memory while
	// another lane's is there; nil: never written (zero state).
	parked map[string][]byte
}

// NewLane adds a lane: another sequence's state, zeroed.
func (m *Model) NewLane() (*Lane, error) {
	f, ok := m.backend.(backend.Forker)
	if !ok || m.lane0.copies {
		l := &Lane{m: m, mem: m.mem, programs: m.programs, mtp: m.mtp, copies: true}
		m.lanes = append(m.lanes, l)
		return l, nil
	}
	mem, err := f.Fork(m.mem, laneKinds...)
	if err != nil {
		return nil, fmt.Errorf("model %s: a lane of its own state: %w", m.Config.Name, err)
	}
	l := &Lane{m: m, mem: mem, programs: map[int]window{}, mtp: map[int]window{}}
	for _, set := range []struct{ from, to map[int]window }{{m.programs, l.programs}, {m.mtp, l.mtp}} {
		for rows, w := range set.from {
			p, err := m.backend.Compile(w.g, mem)
			if err != nil {
				return nil, fmt.Errorf("model %s, %s window T=%d on a new lane: %w", m.Config.Name, w.g.Kind, rows, err)
			}
			if o, ok := p.(backend.Ordered); ok && m.order != nil {
				o.SetOrder(m.order.o, m.order.seed)
			}
			set.to[rows] = window{g: w.g, p: p}
		}
	}
	m.lanes = append(m.lanes, l)
	return l, nil
}

// Copies reports whether switching to this lane copies state (the backend
// is no backend.Forker): the lanes share the model's buffers.
func (l *Lane) Copies() bool { return l.copies }

// NewSession starts a sequence on the lane at position 0, clearing the
// lane's state (a session the lane held before is over).
func (l *Lane) NewSession() *Session {
	mem := l.bind()
	for _, k := range laneKinds {
		mem.Clear(k)
	}
	s := &Session{m: l.m, lane: l}
	for _, p := range l.m.ple {
		s.history = append(s.history, p.hash.Fresh(l.m.eos))
	}
	return s
}

// bind makes the lane's state the one its memory holds and returns that
// memory: a lane of its own buffers is always bound; one sharing the
// model's swaps with the lane that holds them.
func (l *Lane) bind() backend.Memory {
	m := l.m
	if !l.copies || m.resident == l {
		return l.mem
	}
	if r := m.resident; r != nil {
		for _, k := range laneKinds {
			r.parked = m.mem.Snapshot(k, r.parked)
		}
	}
	if l.parked == nil {
		for _, k := range laneKinds {
			m.mem.Clear(k)
		}
	} else {
		m.mem.Restore(l.parked)
	}
	m.resident = l
	return l.mem
}

// Lane is the model's own lane, the one NewSession starts sessions on.
func (m *Model) Lane() *Lane { return m.lane0 }

// LaneBytes is the memory a lane's state takes: the state and cache
// buffers of the model's window graphs (a forked lane allocates that much;
// a swapped one keeps a copy of that size once it has been switched away
// from).
func (m *Model) LaneBytes() int64 {
	seen := map[string]bool{}
	var n int64
	for _, set := range []map[int]window{m.programs, m.mtp} {
		for _, w := range set {
			for _, b := range w.g.Buffers {
				if !seen[b.Name] && (b.Kind == graph.KindState || b.Kind == graph.KindCache) {
					seen[b.Name] = true
					n += b.Size
				}
			}
		}
	}
	return n
}
