package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// shortSeq is fakeSeq with a context of ctx positions.
type shortSeq struct {
	*fakeSeq
	ctx int
}

// Window refuses what does not fit, as Session's does.
func (s shortSeq) Window(tokens []int) ([][]float32, error) {
	if s.Pos()+len(tokens) > s.ctx {
		return nil, fmt.Errorf("%w: %d tokens after this window", ErrContext, s.Pos()+len(tokens))
	}
	return s.fakeSeq.Window(tokens)
}

func (s shortSeq) WindowArgmax(tokens []int) ([]int, error) { return argmaxRows(s.Window(tokens)) }

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
	// Every position of rows longer than one step of eight, the tail too,
	// and the error names the first bad token.
	for n := 1; n <= 21; n++ {
		for at := 0; at < n; at++ {
			for _, bad := range []float32{zero / zero, inf, -inf} {
				row := make([]float32, n)
				for i := range row {
					row[i] = float32(i) - 3e38*float32(i%2)
				}
				row[at] = bad
				err := checkFinite(row)
				if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), fmt.Sprintf("token %d's", at)) {
					t.Fatalf("row of %d with %v at %d: %v", n, bad, at, err)
				}
			}
		}
		if err := checkFinite(make([]float32, n)); err != nil {
			t.Errorf("finite row of %d: %v", n, err)
		}
	}
}

// With drafts, generation runs to the end of the context as plain decoding
// does: the last windows carry only the drafts that fit.
func TestSpecStopsAtTheContextAsPlainDecoding(t *testing.T) {
	gen := func(depth int) ([]int, error) {
		opt := GenerateOptions{PrefillRows: 4, Spec: SpecOptions{Depth: depth, SuffixDraft: 3, Drafter: guessDrafter{V: 5}}}
		return generate(shortSeq{&fakeSeq{V: 5}, 10}, []int{1, 2}, 100, opt)
	}
	plain, err := gen(0)
	if !errors.Is(err, ErrContext) || len(plain) != 9 {
		t.Fatalf("plain: %d tokens, %v; want the 9 a context of 10 holds after a 2-token prompt, then ErrContext", len(plain), err)
	}
	for _, depth := range []int{1, 3} {
		got, err := gen(depth)
		if !errors.Is(err, ErrContext) || !slices.Equal(got, plain) {
			t.Errorf("--spec %d: %v, %v; want %v and ErrContext", depth, got, err, plain)
		}
	}
}

// The check every logits row passes through, at a 248K vocabulary.
func BenchmarkCheckFinite(b *testing.B) {
	row := make([]float32, 248320)
	for i := range row {
		row[i] = float32(i%97) - 48
	}
	b.SetBytes(int64(4 * len(row)))
	for b.Loop() {
		if err := checkFinite(row); err != nil {
			b.Fatal(err)
		}
	}
}
