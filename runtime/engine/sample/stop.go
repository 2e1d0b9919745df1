package sample

import "bytes"

// Stopper ends a text stream where the first of its stop strings completes
// (llama.cpp's and OpenAI's "stop"), however the stream's pieces (the bytes
// of each token) split it.
// It holds back only the bytes that could still begin a stop string, so the
// rest streams at once; the stop string itself is never emitted.
type Stopper struct {
	stops   [][]byte
	held    []byte
	stopped bool
}

// NewStopper returns a Stopper for stops; empty strings are ignored (they
// would stop before the first byte).
func NewStopper(stops []string) *Stopper {
	s := &Stopper{}
	for _, t := range stops {
		if t != "" {
			s.stops = append(s.stops, []byte(t))
		}
	}
	return s
}

// Push feeds the next piece of the stream. emit is what can be shown now
// (valid until the next call); stopped says a stop string has been seen, emit
// then being the text before it. After a stop, Push emits nothing.
func (s *Stopper) Push(b []byte) (emit []byte, stopped bool) {
	if s.stopped {
		return nil, true
	}
	buf := append(s.held, b...)
	if first := firstStop(buf, s.stops); first >= 0 {
		s.stopped, s.held = true, nil
		return buf[:first], true
	}
	// Hold the longest tail that is a proper prefix of a stop string: a match
	// can only start there, since anything earlier was checked above.
	hold := 0
	for _, t := range s.stops {
		for n := min(len(t)-1, len(buf)); n > hold; n-- {
			if bytes.HasSuffix(buf, t[:n]) {
				hold = n
				break
			}
		}
	}
	cut := len(buf) - hold
	emit = append([]byte(nil), buf[:cut]...)
	s.held = append(buf[:0], buf[cut:]...)
	return emit, false
}

// firstStop is where the stop string that completes first in text starts
// (of those completing at the same byte, the longest), or -1. So the answer
// does not depend on how the stream was cut: it is the one a byte-by-byte
// feed would find. No stop string completes inside the held bytes.
func firstStop(text []byte, stops [][]byte) int {
	start, end := -1, 0
	for _, t := range stops {
		i := bytes.Index(text, t)
		if i < 0 {
			continue
		}
		if e := i + len(t); start < 0 || e < end || e == end && i < start {
			start, end = i, e
		}
	}
	return start
}

// Flush returns the held bytes at the end of the stream (nothing after a
// stop) and resets the Stopper for a new stream.
func (s *Stopper) Flush() []byte {
	out := s.held
	if s.stopped {
		out = nil
	}
	s.held, s.stopped = nil, false
	return out
}

// Stopped reports whether a stop string has been seen.
func (s *Stopper) Stopped() bool { return s.stopped }
