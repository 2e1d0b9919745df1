package tokenizer

// Stream turns token ids into text as they arrive without ever emitting half a
// UTF-8 character: bytes that may still become a character wait for the next
// token. The concatenation of everything Push and Flush return equals Decode of
// all the ids pushed.
type Stream struct {
	t       *Tokenizer
	pending []byte
}

// NewStream starts a streaming detokenizer.
func (t *Tokenizer) NewStream() *Stream { return &Stream{t: t} }

// Push adds one token and returns the text that is now complete.
func (s *Stream) Push(id int) string { return s.PushBytes(s.t.TokenBytes(id)) }

// PushBytes adds raw bytes (a token's, or what a stop-string matcher let
// through) and returns the text that is now complete.
func (s *Stream) PushBytes(b []byte) string {
	s.pending = append(s.pending, b...)
	keep := incompleteTail(s.pending)
	ready := s.pending[:len(s.pending)-keep]
	out := string(appendLossy(nil, ready))
	s.pending = append(s.pending[:0], s.pending[len(ready):]...)
	return out
}

// Flush returns what is still held (an unfinished character becomes U+FFFD)
// and resets the stream.
func (s *Stream) Flush() string {
	out := string(appendLossy(nil, s.pending))
	s.pending = s.pending[:0]
	return out
}
