package engine

import (
	"errors"
	"testing"
)

// shortSeq is fakeSeq with a context of ctx positions.
type shortSeq struct {
	*fakeSeq
	ctx int
}

func (s shortSeq) limits() seqLimits {
	l := s.fakeSeq.limits()
	l.context = s.ctx
	return l
}

// A prompt that does not fit in the context is refused before any window
// runs; one that fits runs.
func TestPromptLongerThanTheContextRunsNothing(t *testing.T) {
	f := &fakeSeq{V: 5}
	_, err := generate(shortSeq{f, 8}, []int{1, 2, 3, 4, 1, 2, 3, 4, 1}, 1, GenerateOptions{PrefillRows: 4})
	if !errors.Is(err, ErrContext) || f.windows != 0 {
		t.Fatalf("a 9-token prompt, context 8: %d windows ran, err %v; want none and ErrContext", f.windows, err)
	}
	if _, err := generate(shortSeq{f, 8}, []int{1, 2, 3, 4, 1, 2, 3, 4}, 1, GenerateOptions{PrefillRows: 4}); err != nil {
		t.Fatalf("an 8-token prompt, context 8: %v", err)
	}
	// The session now holds 8 tokens: the next prompt does not fit either.
	f.windows = 0
	_, err = generate(shortSeq{f, 8}, []int{1}, 1, GenerateOptions{PrefillRows: 4})
	if !errors.Is(err, ErrContext) || f.windows != 0 {
		t.Fatalf("a 1-token prompt after 8: %d windows ran, err %v", f.windows, err)
	}
}

// checkFinite finds NaN and ±Inf, and passes finite rows.
func TestCheckFinite(t *testing.T) {
	inf := float32(1)
	for range 200 {
		inf *= 10
	}
	zero := float32(0)
	for _, row := range [][]float32{{1, zero / zero}, {inf, 0}, {0, -inf}} {
		if err := checkFinite(row); !errors.Is(err, ErrNonFinite) {
			t.Errorf("checkFinite(%v) = %v; want ErrNonFinite", row, err)
		}
	}
	if err := checkFinite([]float32{-3e38, 0, 3e38}); err != nil {
		t.Errorf("finite row: %v", err)
	}
}
