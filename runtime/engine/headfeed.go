package engine

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
)

// headFeed keeps the MTP head's caches filled for every committed position
// without running the head after every window. The head reads the hidden
// rows a trunk window leaves in the carry buffer (mtp_hidden), which the
// next trunk window overwrites; so when the head does not run, the rows are
// copied to the host (pending) and, when it runs again, written back into
// the carry and fed in one batched window (several when more rows are
// pending than the largest MTP window holds). Row by row the head's math
// depends only on its caches and its own row, so the caught-up caches and
// the logits after them are those of a head that never skipped.
type headFeed struct {
	s        sequence
	next     int    // the first position the head was not fed
	tokens   []int  // pending: the token after each pending row
	hidden   []byte // pending: the trunk's hidden rows, rowBytes each
	maxRows  int    // the largest MTP window
	caughtUp int    // pending rows fed so far
}

// pendingRows is how many committed positions the head has not been fed.
func (h *headFeed) pendingRows() int { return len(h.tokens) }

// pendingBytes is the host memory the pending rows hold.
func (h *headFeed) pendingBytes() int { return len(h.hidden) }

// stash keeps the rows of the trunk window that just ran (row t at pos+t
// paired with tokens[t]) for a later feed.
func (h *headFeed) stash(tokens []int, pos int) error {
	h.from(pos)
	hidden, err := h.s.hiddenRows(len(tokens), h.hidden)
	if err != nil {
		return err
	}
	h.hidden = hidden
	h.tokens = append(h.tokens, tokens...)
	return nil
}

// from makes the pending rows end where rows at pos start: a session
// rewound to an earlier position (a server's prefix cache) feeds those
// positions again, so the pending rows from pos on are dropped; rows after a
// gap (a prompt whose last rows never reached the head) start over there.
func (h *headFeed) from(pos int) {
	end := h.next + len(h.tokens)
	switch {
	case len(h.tokens) == 0 || pos < h.next || pos > end:
		h.next, h.tokens, h.hidden = pos, h.tokens[:0], h.hidden[:0]
	case pos < end:
		n := pos - h.next
		h.hidden = h.hidden[:n*len(h.hidden)/len(h.tokens)]
		h.tokens = h.tokens[:n]
	}
}

// feed runs the head over the pending rows and then the rows of the trunk
// window that just ran (row t at pos+t paired with tokens[t]; none: only
// the pending ones) and returns the logits of the last window it ran.
func (h *headFeed) feed(tokens []int, pos int) (logits [][]float32, rows int, err error) {
	if len(tokens) > 0 {
		h.from(pos)
	}
	if len(h.tokens) == 0 {
		if len(tokens) == 0 {
			return nil, 0, nil
		}
		// Nothing pending: the rows are in the carry already.
		h.next = pos + len(tokens)
		logits, err := h.s.MTPWindow(tokens, pos)
		return logits, len(tokens), err
	}
	if len(tokens) > 0 {
		if err := h.stash(tokens, pos); err != nil {
			return nil, 0, err
		}
	}
	rowBytes := len(h.hidden) / len(h.tokens)
	at, n := h.next, len(h.tokens)
	for i := 0; i < n; i += h.maxRows {
		j := min(i+h.maxRows, n)
		if err := h.s.setHiddenRows(h.hidden[i*rowBytes : j*rowBytes]); err != nil {
			return nil, 0, err
		}
		if logits, err = h.s.MTPWindow(h.tokens[i:j], at+i); err != nil {
			return nil, 0, err
		}
	}
	h.caughtUp += n - len(tokens)
	h.next = at + n
	h.tokens, h.hidden = h.tokens[:0], h.hidden[:0]
	return logits, n, nil
}

func (s *sessionSeq) headFeed() *headFeed { return &s.head }

// hiddenRows appends the first n rows the last trunk window left for the
// MTP head to dst.
func (s *sessionSeq) hiddenRows(n int, dst []byte) ([]byte, error) {
	b, err := s.mem().Bytes(graph.Range{Buffer: s.m.carry, Size: int64(n * s.m.carryRow)})
	if err != nil {
		return dst, fmt.Errorf("reading the MTP head's hidden rows: %w", err)
	}
	return append(dst, b...), nil
}

// setHiddenRows writes rows at the start of the carry, where the MTP
// window reads its hidden rows.
func (s *sessionSeq) setHiddenRows(rows []byte) error {
	if err := backend.Write(s.mem(), graph.Range{Buffer: s.m.carry, Size: int64(len(rows))}, rows); err != nil {
		return fmt.Errorf("writing the MTP head's hidden rows: %w", err)
	}
	return nil
}

// carryBuffer names the buffer the trunk leaves its hidden rows in for the
// MTP head ("" when no graph has one), and the bytes of one row: the
// residual, all hyper-connection streams side by side, in f32.
func carryBuffer(c *models.Config, gs []*graph.Graph) (name string, rowBytes int) {
	a := c.Architecture
	for _, g := range gs {
		for _, b := range g.Buffers {
			if b.Kind == graph.KindCarry {
				return b.Name, 4 * max(a.HyperConnections.Count, 1) * a.HiddenSize
			}
		}
	}
	return "", 0
}
