package engine

// Window runs one window over tokens (1 ≤ len ≤ the largest shape) and returns
// the logits it computed: one row per token, or only the last row when the
// chosen shape computes last-row logits. A failed window marks the model's
// run as failed (its usage history is then not saved at Close).
func (s *Session) Window(tokens []int) ([][]float32, error) {
	out, err := s.window(tokens)
	if err != nil {
		s.m.markFailed()
	}
	return out, err
}

// WindowArgmax runs one window as Window does and returns greedy's choice
// for each row Window would return logits for: the first index of the row's
// largest logit, chosen on the device (the window's argmax output), so the
// logits are not read back. A non-finite row is the error Window gives.
func (s *Session) WindowArgmax(tokens []int) ([]int, error) {
	out, err := s.windowArgmax(tokens)
	if err != nil {
		s.m.markFailed()
	}
	return out, err
}

// MTPWindow runs the MTP draft head over the hidden rows the last trunk
// window left: row t pairs the trunk's row t with tokens[t] (the token that
// follows it) at position pos+t, and yields logits for the token after that.
// The head keeps its own KV and index caches, advanced by these rows.
func (s *Session) MTPWindow(tokens []int, pos int) ([][]float32, error) {
	out, err := s.mtpWindow(tokens, pos)
	if err != nil {
		s.m.markFailed()
	}
	return out, err
}

// markFailed keeps a failed run's usage history from being saved.
func (m *Model) markFailed() {
	if m.stream != nil {
		m.stream.failed = true
	}
}
