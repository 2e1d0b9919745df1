package engine

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models/ngram"
)

// Mark is a point of a session it can return to: the model's state (KV
// entries past the position are simply overwritten later, as a rejected
// draft's are) and the n-gram context at a position.
type Mark struct {
	s       *Session
	snap    map[string][]byte
	pos     int
	history []ngram.History
}

// Mark remembers the session's state at its current position. It copies the
// recurrent and convolution state (not the KV cache), so it costs a state's
// worth of memory.
func (s *Session) Mark() *Mark {
	m := &Mark{}
	s.markInto(m)
	return m
}

// markInto takes a mark into m, reusing its buffers.
func (s *Session) markInto(m *Mark) {
	m.s = s
	m.snap = s.mem().Snapshot(graph.KindState, m.snap)
	m.pos, m.history = s.pos, s.history
}

// Pos is the position the mark was taken at.
func (m *Mark) Pos() int { return m.pos }

// Rewind returns the session to the mark, which must be this session's and
// taken while it was the model's current one.
func (s *Session) Rewind(m *Mark) error {
	if m == nil || m.s != s {
		return fmt.Errorf("rewind: the mark belongs to another session")
	}
	if m.pos > s.pos {
		return fmt.Errorf("rewind: the mark is at position %d, past the session's %d", m.pos, s.pos)
	}
	s.rewindTo(m)
	return nil
}

// rewindTo returns to m without checking it.
func (s *Session) rewindTo(m *Mark) {
	s.mem().Restore(m.snap)
	s.pos, s.history = m.pos, m.history
}
