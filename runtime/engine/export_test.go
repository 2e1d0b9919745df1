package engine

// CopyLanes makes the lanes m adds from now on share its memory and swap
// state on a switch, as on a backend that is no backend.Forker: the tests
// run both ways on the cpu backend.
func CopyLanes(m *Model) { m.lane0.copies = true }

// SetHeadSchedule makes Generate run the MTP head after a window only when
// run(tokens generated so far, rows pending) says so, instead of asking the
// gate; restore puts the gate back in charge.
func SetHeadSchedule(run func(step, pending int) bool) (restore func()) {
	headSchedule = run
	return func() { headSchedule = nil }
}

// TeacherForcedSkipping is TeacherForced's MTP half with the head fed
// lazily: the trunk runs windows of rows rows over tokens; after window w
// the head is fed (the rows it missed caught up first) unless skip(w), when
// the window's rows are kept for later. mtp[t] are the head's logits for
// tokens[t+2] where a feed returned them (the rows of its last window),
// nil elsewhere.
func TeacherForcedSkipping(m *Model, tokens []int, rows int, skip func(w int) bool) (mtp [][]float32, caughtUp int, err error) {
	s := &sessionSeq{Session: m.NewSession()}
	h := s.headFeed()
	h.s, h.maxRows = s, s.limits().mtpRows
	mtp = make([][]float32, len(tokens)-1)
	for w, a := 0, 0; a+1 < len(tokens); w, a = w+1, a+rows {
		b := min(a+rows, len(tokens))
		if _, err := s.Window(tokens[a:b]); err != nil {
			return nil, 0, err
		}
		next := tokens[a+1 : min(b+1, len(tokens))]
		if skip(w) {
			if err := h.stash(next, a); err != nil {
				return nil, 0, err
			}
			continue
		}
		got, _, err := h.feed(next, a)
		if err != nil {
			return nil, 0, err
		}
		end := a + len(next)
		for i, r := range got {
			mtp[end-len(got)+i] = r
		}
	}
	return mtp, h.caughtUp, nil
}

// SetMaxCarried bounds the bytes a layer-major group of windows carries
// (small: groups of fewer windows); restore puts the default back.
func SetMaxCarried(n int64) (restore func()) {
	old := maxCarried
	maxCarried = n
	return func() { maxCarried = old }
}
