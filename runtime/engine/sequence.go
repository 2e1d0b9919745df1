package engine

// sequence is what the decode loop drives: a Session, or in tests a
// synthetic model whose logits are a known function of the tokens (so the
// loop's output distribution can be derived by hand).
type sequence interface {
	// Window feeds tokens at the current position and returns their logits.
	Window(tokens []int) ([][]float32, error)
	// WindowArgmax feeds tokens as Window does and returns, for each row
	// Window would return, the first index of its largest logit.
	WindowArgmax(tokens []int) ([]int, error)
	// MTPWindow runs the MTP head (see Session.MTPWindow).
	MTPWindow(tokens []int, pos int) ([][]float32, error)
	// Pos is the number of tokens consumed.
	Pos() int
	// mark remembers the state before a drafted window; rewind returns to
	// it (any number of times), so rejected rows leave no trace.
	mark()
	rewind()
	// hiddenRows appends the first n hidden rows the last trunk window left
	// for the MTP head to dst; setHiddenRows puts rows there for the next
	// MTP window (the head catching up on rows it was not fed).
	hiddenRows(n int, dst []byte) ([]byte, error)
	setHiddenRows(rows []byte) error
	// coldWindow says whether the last window was its program's first run,
	// whose time is no measure of the window's cost (Model.warm).
	coldWindow() bool
	// headFeed is where the rows the MTP head was not fed are kept.
	headFeed() *headFeed
	limits() seqLimits
}

// seqLimits are the sizes the decode loop plans windows with.
type seqLimits struct {
	name          string
	shapes        []int // window row counts, ascending
	maxDecodeRows int   // windows.max_decode_rows
	context       int   // Model.Context: the most positions a session may use
	hasMTP        bool
	mtpRows       int // the largest MTP window
}

// sessionSeq is a Session as a sequence, with the marked state.
type sessionSeq struct {
	*Session
	at Mark
}

func (s *sessionSeq) mark() { s.markInto(&s.at) }

func (s *sessionSeq) coldWindow() bool {
	s.m.warmMu.Lock()
	defer s.m.warmMu.Unlock()
	return s.m.cold
}
func (s *sessionSeq) rewind() { s.rewindTo(&s.at) }

func (s *sessionSeq) limits() seqLimits {
	c := s.m.Config
	l := seqLimits{name: c.Name, shapes: s.m.shapes, maxDecodeRows: c.Windows.MaxDecodeRows,
		context: s.m.context, hasMTP: s.m.HasMTP()}
	for rows := range s.lane.mtp {
		l.mtpRows = max(l.mtpRows, rows)
	}
	return l
}
