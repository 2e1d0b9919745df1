package engine

import (
	"errors"
	"fmt"
	"math"
	"time"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/internal/greedy"
	"github.com/strata-llm/strata/models/ngram"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/backend"
)

func quantFormat(name string) (*quant.Format, error) { return quant.Lookup(name) }

// Session is one sequence: its position and the state of its lane (KV
// cache, conv and recurrent state) that the windows advance. A lane holds
// one session at a time; a model runs one window at a time, of any lane's
// session.
type Session struct {
	m    *Model
	lane *Lane
	pos  int
	// history holds each PLE layer's n-gram context (the last tokens), which
	// lives on the host because the host hashes the tokens.
	history []ngram.History
	// head holds the committed rows the MTP head was not fed yet (Generate
	// runs it only when its drafts are wanted), from one call to the next.
	head headFeed
	// reuseLogits lets a trunk window's logits live in logitBuf, valid only
	// until the next trunk window: set by Generate while no caller keeps
	// rows. A fresh 600 KB row a token is fresh pages a token: the weights
	// put the GC's goal gigabytes away, so no freed row is ever reused, and
	// faulting the pages in cost ~1 ms of a 27 ms CPU decode token.
	reuseLogits bool
	logitBuf    []float32
}

// NewSession starts a sequence at position 0 on the model's own lane,
// clearing its state.
func (m *Model) NewSession() *Session { return m.lane0.NewSession() }

// Lane is the lane the session's state lives in.
func (s *Session) Lane() *Lane { return s.lane }

// mem is the memory the session's windows run on, its lane's state bound.
func (s *Session) mem() backend.Memory { return s.lane.bind() }

// Pos is the number of tokens the session has consumed.
func (s *Session) Pos() int { return s.pos }

// window is Window.
func (s *Session) window(tokens []int) ([][]float32, error) {
	mem, p, at, err := s.feed(tokens)
	if err != nil {
		return nil, err
	}
	return s.logits(mem, p, len(tokens), at, s.reuseLogits)
}

// windowArgmax is WindowArgmax.
func (s *Session) windowArgmax(tokens []int) ([]int, error) {
	mem, p, at, err := s.feed(tokens)
	if err != nil {
		return nil, err
	}
	return s.argmax(mem, p, len(tokens), at)
}

// feed runs the window over tokens at the session's position and advances
// it; at is the position of the window's first row.
func (s *Session) feed(tokens []int) (mem backend.Memory, p window, at int, err error) {
	n := len(tokens)
	p, err = s.program(s.lane.programs, tokens, s.pos)
	if err != nil {
		return nil, p, 0, err
	}
	mem = s.mem()
	if err := s.writeParams(mem, p.g, tokens, s.pos); err != nil {
		return nil, p, 0, err
	}
	next, err := s.gatherNgrams(mem, p.g, tokens)
	if err != nil {
		return nil, p, 0, err
	}
	if err := s.m.run(p); err != nil {
		return nil, p, 0, fmt.Errorf("model %s, window of %d rows at position %d: %w", s.m.Config.Name, n, s.pos, err)
	}
	at = s.pos
	s.pos += n
	s.history = next
	return mem, p, at, nil
}

// argmax reads the window's argmax output (graph output 1: per logits row
// the index of its largest logit and a non-finite flag): two words a row
// instead of the row. A flagged row is read whole, so the error is logits'
// own. A graph without the output (none is generated so) falls back to the
// logits.
func (s *Session) argmax(mem backend.Memory, p window, n, pos int) ([]int, error) {
	rows := min(n, p.g.LogitRows)
	out, err := p.g.Output(1)
	if err != nil {
		logits, err := s.logits(mem, p, n, pos, s.reuseLogits)
		if err != nil {
			return nil, err
		}
		best := make([]int, len(logits))
		for i, row := range logits {
			best[i] = Argmax(row)
		}
		return best, nil
	}
	if out.Size < int64(8*rows) {
		return nil, fmt.Errorf("model %s, %s window of %d rows: its argmax output holds %d bytes, %d rows need %d", s.m.Config.Name, p.g.Kind, n, out.Size, rows, 8*rows)
	}
	out.Size = int64(8 * rows)
	b, err := mem.Bytes(out)
	if err != nil {
		return nil, err
	}
	words := backend.Uint32s(b)
	best := make([]int, rows)
	for i := range best {
		if words[2*i+1] != 0 {
			if _, err := s.logits(mem, p, n, pos, s.reuseLogits); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("model %s, %s window of %d rows: the device found a non-finite logit at position %d that the host did not", s.m.Config.Name, p.g.Kind, n, pos+n-rows+i)
		}
		best[i] = int(words[2*i])
		if best[i] >= s.m.Config.Architecture.VocabSize {
			return nil, fmt.Errorf("model %s, %s window of %d rows: the device's argmax at position %d is %d, outside the vocabulary of %d", s.m.Config.Name, p.g.Kind, n, pos+n-rows+i, best[i], s.m.Config.Architecture.VocabSize)
		}
	}
	return best, nil
}

// run executes one window; with streamed experts, the residency the router
// may see is refreshed first and every host point makes the chosen experts
// resident.
func (m *Model) run(w window) error {
	m.warmMu.Lock()
	m.cold = !m.warm[w.p]
	if m.cold {
		if m.warm == nil {
			m.warm = map[backend.Program]bool{}
		}
		m.warm[w.p] = true
	}
	m.warmMu.Unlock()
	if m.stream == nil {
		return w.p.Run()
	}
	hp, ok := w.p.(backend.HostProgram)
	if !ok {
		return fmt.Errorf("expert streaming needs a backend that stops at host points; %T does not", w.p)
	}
	m.stream.BeginWindow()
	m.publishResidency()
	if cp, ok := w.p.(backend.CheckedProgram); ok && m.checkedWindow(w.g) {
		checks, err := m.hostChecks(w.g)
		if err != nil {
			return err
		}
		return cp.RunChecked(checks, m.checkedHostPoint)
	}
	return hp.RunHost(func(p graph.HostPoint) error { return m.hostPoint(w.g, p) })
}

// program picks the smallest window shape of set that holds the tokens, after
// checking them and the context.
func (s *Session) program(set map[int]window, tokens []int, pos int) (window, error) {
	c, n := s.m.Config, len(tokens)
	if n == 0 {
		return window{}, fmt.Errorf("empty window")
	}
	shape, largest := -1, 0
	for t := range set {
		largest = max(largest, t)
		if t >= n && (shape < 0 || t < shape) {
			shape = t
		}
	}
	if shape < 0 {
		return window{}, fmt.Errorf("a window of %d rows is larger than the largest window shape of model %s (%d rows)", n, c.Name, largest)
	}
	for i, tok := range tokens {
		if tok < 0 || tok >= c.Architecture.VocabSize {
			return window{}, fmt.Errorf("token %d (position %d) is out of range: model %s has a vocabulary of %d ids (0..%d)", tok, pos+i, c.Name, c.Architecture.VocabSize, c.Architecture.VocabSize-1)
		}
	}
	if pos+n > s.m.context {
		return window{}, fmt.Errorf("%w: %d tokens after this window, but model %s runs with a context of %d tokens", ErrContext, pos+n, c.Name, s.m.context)
	}
	return set[shape], nil
}

// mtpWindow is MTPWindow.
func (s *Session) mtpWindow(tokens []int, pos int) ([][]float32, error) {
	if !s.m.HasMTP() {
		return nil, fmt.Errorf("model %s has no MTP head loaded", s.m.Config.Name)
	}
	p, err := s.program(s.lane.mtp, tokens, pos)
	if err != nil {
		return nil, err
	}
	mem := s.mem()
	if err := s.writeParams(mem, p.g, tokens, pos); err != nil {
		return nil, err
	}
	if err := s.m.run(p); err != nil {
		return nil, fmt.Errorf("model %s, MTP window at position %d: %w", s.m.Config.Name, pos, err)
	}
	return s.logits(mem, p, len(tokens), pos, false)
}

// logits copies the logits a window computed: one row per token, or only
// the last row when the shape computes last-row logits. A non-finite logit
// (corrupt weights, an overflow) is an error naming the position, since no
// token sampled from it means anything.
func (s *Session) logits(mem backend.Memory, p window, n, pos int, reuse bool) ([][]float32, error) {
	m, c := s.m, s.m.Config
	out, err := p.g.Output(0)
	if err != nil {
		return nil, err
	}
	b, err := mem.Bytes(out)
	if err != nil {
		return nil, err
	}
	all := backend.Float32s(b)
	V := c.Architecture.VocabSize
	rows := min(n, p.g.LogitRows)
	logits := make([][]float32, rows)
	first := pos + n - rows // the position of row 0
	var buf []float32
	if reuse {
		if cap(s.logitBuf) < rows*V {
			s.logitBuf = make([]float32, rows*V)
		}
		buf = s.logitBuf[:rows*V]
	} else {
		buf = make([]float32, rows*V)
	}
	for r := range logits {
		logits[r] = buf[r*V : (r+1)*V : (r+1)*V]
		copy(logits[r], all[r*V:(r+1)*V])
		if err := checkFinite(logits[r]); err != nil {
			return nil, fmt.Errorf("model %s, %s window of %d rows: the logits at position %d: %w%s", c.Name, p.g.Kind, n, first+r, err, m.firstNonFinite(mem, p.g))
		}
	}
	return logits, nil
}

// ErrNonFinite is the error non-finite logits wrap.
var ErrNonFinite = errors.New("non-finite logits")

// checkFinite reports the first NaN or ±Inf in row. It tests the exponent
// bits (all ones only for NaN and ±Inf), eight floats a step, and looks for
// the culprit only when a step has one: the check runs on every logits row,
// which for a 248K vocabulary is a quarter million floats a token.
func checkFinite(row []float32) error {
	const exp = 0x7f800000
	bits := unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(row))), len(row))
	i := 0
	for ; i+8 <= len(bits); i += 8 {
		b := bits[i : i+8 : i+8]
		if b[0]&exp == exp || b[1]&exp == exp || b[2]&exp == exp || b[3]&exp == exp ||
			b[4]&exp == exp || b[5]&exp == exp || b[6]&exp == exp || b[7]&exp == exp {
			break
		}
	}
	for ; i < len(row); i++ {
		if v := row[i]; math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w: token %d's logit is %v (corrupt weights, or an overflow)", ErrNonFinite, i, v)
		}
	}
	return nil
}

func (s *Session) writeParams(mem backend.Memory, g *graph.Graph, tokens []int, pos int) error {
	return g.WriteParams(mem.Buffer(graph.ParamsBuffer), tokens, pos)
}

// gatherNgrams hashes the window's tokens to n-gram table rows for every PLE
// layer and gathers the rows into the params buffer. The row ids are a pure
// function of the tokens, so this happens before the window runs. It returns
// the histories after the window.
func (s *Session) gatherNgrams(mem backend.Memory, g *graph.Graph, tokens []int) ([]ngram.History, error) {
	if len(s.m.ple) > 0 {
		start := time.Now()
		defer func() {
			s.m.ngramTime.Add(int64(time.Since(start)))
			s.m.ngramWindows.Add(1)
		}()
	}
	var next []ngram.History
	for i, p := range s.m.ple {
		ids, h := p.hash.RowIDs(s.history[i], tokens, s.m.eos)
		field, ok := g.Param(graph.ParamPLE(p.layer))
		if !ok {
			return nil, fmt.Errorf("window graph T=%d has no params field for PLE layer %d", g.Rows, p.layer)
		}
		dst := backend.Float32s(mem.Buffer(graph.ParamsBuffer)[field.Offset : field.Offset+4*int64(field.Count)])
		if err := p.table.Gather(ids, dst); err != nil {
			return nil, err
		}
		next = append(next, h)
	}
	return next, nil
}

// Argmax is greedy sampling: the first index of the largest logit.
func Argmax(logits []float32) int {
	best, _ := greedy.Choose(logits)
	return best
}
