package engine

import (
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models/ngram"
)

// State is a copy of a session's sequence state: the recurrent and conv
// state, the KV and index caches, the position and the n-gram context. A
// server keeps a few to resume conversations, since the recurrent state
// cannot be rewound to a shorter prefix.
type State struct {
	pos     int
	history []ngram.History
	bufs    map[string][]byte
}

// Save copies the session's state out of the model's memory, into dst when
// it is not nil (its buffers reused).
func (s *Session) Save(dst *State) *State {
	if dst == nil {
		dst = &State{}
	}
	mem := s.mem()
	dst.bufs = mem.Snapshot(graph.KindState, dst.bufs)
	dst.bufs = mem.Snapshot(graph.KindCache, dst.bufs)
	dst.pos = s.pos
	dst.history = cloneHistory(s.history)
	return dst
}

// Restore puts a saved state (of a session of the same model) back: the
// session continues from there. The State stays valid for more restores.
func (s *Session) Restore(st *State) {
	s.mem().Restore(st.bufs)
	s.pos = st.pos
	s.history = cloneHistory(st.history)
}

// Pos is the position the state was saved at.
func (st *State) Pos() int { return st.pos }

// Bytes is the memory the copy holds.
func (st *State) Bytes() int64 {
	n := int64(0)
	for _, b := range st.bufs {
		n += int64(len(b))
	}
	return n
}

func cloneHistory(h []ngram.History) []ngram.History {
	out := make([]ngram.History, len(h))
	for i, x := range h {
		out[i] = append(ngram.History(nil), x...)
	}
	return out
}
