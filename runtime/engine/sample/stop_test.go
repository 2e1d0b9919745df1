package sample

import (
	"strings"
	"testing"
)

// feed pushes pieces through a Stopper and returns what it emitted (with
// Flush when it did not stop), whether it stopped, and after which piece.
func feed(stops []string, pieces []string) (out string, stopped bool, at int, emits []string) {
	s := NewStopper(stops)
	at = -1
	for i, p := range pieces {
		e, st := s.Push([]byte(p))
		emits = append(emits, string(e))
		out += string(e)
		if st {
			return out, true, i, emits
		}
	}
	return out + string(s.Flush()), false, at, emits
}

func TestStopperSplits(t *testing.T) {
	cases := []struct {
		name    string
		stops   []string
		pieces  []string
		out     string
		stopped bool
		emits   []string // what each push emitted, when checked
	}{
		{"no stops", nil, []string{"ab", "c"}, "abc", false, []string{"ab", "c"}},
		{"whole token", []string{"</s>"}, []string{"hi", "</s>", "more"}, "hi", true, nil},
		{"split over three", []string{"STOP"}, []string{"aS", "T", "OPz"}, "a", true, []string{"a", "", ""}},
		{"inside one piece", []string{"\n\n"}, []string{"x\n\ny"}, "x", true, nil},
		// "ab" held back, then "abd" is no stop: all of it goes out.
		{"false start released", []string{"abc"}, []string{"xab", "d"}, "xabd", false, []string{"x", "abd"}},
		// the held tail restarts inside itself: "aab" + "c" stops at 1.
		{"overlapping restart", []string{"abc"}, []string{"aa", "b", "c"}, "a", true, []string{"a", "", ""}},
		// The first to complete wins, even against a longer one begun earlier,
		// however the pieces fall; at the same byte, the longer one.
		{"first to complete wins", []string{"abcd", "bc"}, []string{"ab", "c"}, "a", true, nil},
		{"first to complete, one piece", []string{"abcd", "bc"}, []string{"abcd"}, "a", true, nil},
		{"same end: the longer", []string{"cd", "abcd"}, []string{"abcd"}, "", true, nil},
		{"held at the end is flushed", []string{"END"}, []string{"foo E", "N"}, "foo EN", false, []string{"foo ", ""}},
		// Multi-byte UTF-8 split between pieces: the bytes pass through whole.
		{"utf-8 split", []string{"。"}, []string{"é\xe3\x80", "\x82x"}, "é", true, nil},
		{"empty stop ignored", []string{""}, []string{"a"}, "a", false, nil},
	}
	for _, c := range cases {
		out, stopped, _, emits := feed(c.stops, c.pieces)
		if out != c.out || stopped != c.stopped {
			t.Errorf("%s: out %q stopped %v, want %q %v", c.name, out, stopped, c.out, c.stopped)
		}
		if c.emits != nil && strings.Join(emits, "|") != strings.Join(c.emits, "|") {
			t.Errorf("%s: emitted %q per push, want %q", c.name, emits, c.emits)
		}
	}
}

// wholeText is the answer on the whole text, worked out byte by byte: the
// text up to the first stop string to complete (the longest of those that
// complete at the same byte).
func wholeText(text string, stops []string) (string, bool) {
	for end := 1; end <= len(text); end++ {
		best := -1
		for _, s := range stops {
			if s != "" && strings.HasSuffix(text[:end], s) && (best < 0 || end-len(s) < best) {
				best = end - len(s)
			}
		}
		if best >= 0 {
			return text[:best], true
		}
	}
	return text, false
}

// Every way of cutting a text into pieces gives the same result as matching
// on the whole text, and no push holds back more than the longest stop
// string's length minus one.
func TestStopperEveryCut(t *testing.T) {
	stops := []string{"<|im_end|>", "\n\nUser:", "ss"}
	texts := []string{"hello <|im_end|> tail", "a\n\nUse\n\nUser: x", "misstep", "no stop here <|im_", "<|<|im_end|>"}
	for _, text := range texts {
		want, wantStop := wholeText(text, stops)
		// All cuts into up to three pieces.
		for i := 0; i <= len(text); i++ {
			for j := i; j <= len(text); j++ {
				pieces := []string{text[:i], text[i:j], text[j:]}
				s := NewStopper(stops)
				var out string
				stopped := false
				fed := 0
				for _, p := range pieces {
					e, st := s.Push([]byte(p))
					out += string(e)
					fed += len(p)
					if st {
						stopped = true
						break
					}
					if held := fed - len(out); held > len("<|im_end|>")-1 {
						t.Fatalf("%q cut %d,%d: holds %d bytes", text, i, j, held)
					}
				}
				if !stopped {
					out += string(s.Flush())
				}
				if out != want || stopped != wantStop {
					t.Fatalf("%q cut at %d,%d: %q %v, want %q %v", text, i, j, out, stopped, want, wantStop)
				}
			}
		}
	}
}

func TestStopperAfterStop(t *testing.T) {
	s := NewStopper([]string{"x"})
	if e, st := s.Push([]byte("axb")); string(e) != "a" || !st {
		t.Fatalf("push: %q %v", e, st)
	}
	if e, st := s.Push([]byte("more")); e != nil || !st || !s.Stopped() {
		t.Errorf("after a stop: %q %v", e, st)
	}
	if f := s.Flush(); f != nil {
		t.Errorf("flush after a stop: %q", f)
	}
	// Flush resets for a new stream.
	if e, st := s.Push([]byte("ab")); string(e) != "ab" || st {
		t.Errorf("after flush: %q %v", e, st)
	}
}

// FuzzStopper: any text cut anywhere into pieces, against any two stop
// strings, gives what matching on the whole text gives.
func FuzzStopper(f *testing.F) {
	f.Add("hello <|im_end|> tail", "<|im_end|>", "ss", uint64(0x1234))
	f.Add("aaab", "aab", "b", uint64(7))
	f.Add("\n\nUser:", "\n\n", "User", uint64(99))
	f.Fuzz(func(t *testing.T, text, s1, s2 string, cuts uint64) {
		stops := []string{s1, s2}
		want, stop := wholeText(text, stops)
		st := NewStopper(stops)
		var out []byte
		stopped := false
		for rest := text; len(rest) > 0 && !stopped; {
			n := 1 + int(cuts%5)
			cuts /= 5
			n = min(n, len(rest))
			e, s := st.Push([]byte(rest[:n]))
			out, stopped = append(out, e...), s
			rest = rest[n:]
		}
		if !stopped {
			out = append(out, st.Flush()...)
		}
		if string(out) != want || stopped != stop {
			t.Fatalf("%q with stops %q: %q %v, want %q %v", text, stops, out, stopped, want, stop)
		}
	})
}
