package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/internal/chisq"
)

// fakeSeq is a synthetic model: the logits after a token sequence are a
// fixed function of its last two tokens and its length, so every
// distribution the decode loop should produce can be enumerated.
type fakeSeq struct {
	V       int
	fed     []int // every token consumed
	marked  int
	windows int
	failAt  int // the window (1-based) that fails; 0: none
	mtp     bool
	mtpPos  []int // the position of every MTP window
	// carry stands for the hidden rows a window leaves for the head: the
	// trunk's row at position q is q, the head's own row at q is −(q+1).
	carry   []float32
	headFed []int // positions fed to the head from trunk rows, in order
	head    headFeed
}

func (f *fakeSeq) logitsAfter(h []int) []float32 {
	a, b := h[len(h)-1], -1
	if len(h) > 1 {
		b = h[len(h)-2]
	}
	row := make([]float32, f.V)
	for j := range row {
		row[j] = float32(1.5 * math.Sin(1.3*float64(a)+0.7*float64(b)+2.1*float64(j)+0.4*float64(len(h))))
	}
	return row
}

func (f *fakeSeq) Window(tokens []int) ([][]float32, error) {
	f.windows++
	if f.windows == f.failAt {
		return nil, fmt.Errorf("window %d fails", f.windows)
	}
	var out [][]float32
	f.carry = f.carry[:0]
	for _, t := range tokens {
		f.carry = append(f.carry, float32(len(f.fed)))
		f.fed = append(f.fed, t)
		out = append(out, f.logitsAfter(f.fed))
	}
	return out, nil
}

func (f *fakeSeq) WindowArgmax(tokens []int) ([]int, error) { return argmaxRows(f.Window(tokens)) }

// argmaxRows is a sequence's WindowArgmax from its Window's result.
func argmaxRows(rows [][]float32, err error) ([]int, error) {
	if err != nil {
		return nil, err
	}
	best := make([]int, len(rows))
	for i, r := range rows {
		best[i] = Argmax(r)
	}
	return best, nil
}

func (f *fakeSeq) MTPWindow(tokens []int, pos int) ([][]float32, error) {
	if !f.mtp {
		return nil, errors.New("no MTP head")
	}
	f.mtpPos = append(f.mtpPos, pos)
	// Each row must carry the trunk's row at its position, or (a chained
	// draft) the head's own row before it.
	for i := range tokens {
		switch h := f.carry[i]; {
		case h == float32(pos+i):
			f.headFed = append(f.headFed, pos+i)
		case len(tokens) == 1 && h == float32(-pos):
		default:
			return nil, fmt.Errorf("MTP row %d at position %d carries hidden row %v", i, pos+i, h)
		}
	}
	f.carry[0] = float32(-(pos + len(tokens)))
	var out [][]float32
	for i := range tokens {
		out = append(out, f.logitsAfter(tokens[:i+1]))
	}
	return out, nil
}

func (f *fakeSeq) hiddenRows(n int, dst []byte) ([]byte, error) {
	for _, h := range f.carry[:n] {
		dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(h))
	}
	return dst, nil
}

func (f *fakeSeq) setHiddenRows(rows []byte) error {
	for i := 0; i < len(rows); i += 4 {
		h := math.Float32frombits(binary.LittleEndian.Uint32(rows[i:]))
		if i/4 < len(f.carry) {
			f.carry[i/4] = h
		} else {
			f.carry = append(f.carry, h)
		}
	}
	return nil
}

func (f *fakeSeq) headFeed() *headFeed { return &f.head }

func (f *fakeSeq) coldWindow() bool { return false }

func (f *fakeSeq) Pos() int { return len(f.fed) }
func (f *fakeSeq) mark()    { f.marked = len(f.fed) }
func (f *fakeSeq) rewind()  { f.fed = f.fed[:f.marked] }
func (f *fakeSeq) limits() seqLimits {
	return seqLimits{name: "fake", shapes: []int{1, 2, 3, 4}, maxDecodeRows: 4, context: 1 << 20, hasMTP: f.mtp, mtpRows: 4}
}

// guessDrafter drafts deterministically from the history: the token that
// follows the last one in a fixed table, so drafts are sometimes likely,
// sometimes not, and every acceptance path of the verifier is taken.
type guessDrafter struct{ V int }

func (g guessDrafter) Draft(hist []int, k int) ([]int, []float64) {
	var d []int
	last := hist[len(hist)-1]
	for range k {
		last = (last*3 + 1) % g.V
		d = append(d, last)
	}
	return d, slices.Repeat([]float64{0.5}, k)
}

// chain is the sampling chain the statistical tests use: every step on.
var chain = sample.Params{Temperature: 0.9, TopK: 4, TopP: 0.97, MinP: 0.02,
	RepeatPenalty: 1.4, PresencePenalty: 0.3, FrequencyPenalty: 0.2, PenaltyLastN: 3}

// TestSpecSampledDistribution: speculative decoding at temperature > 0 under
// the whole chain yields the same distribution of generated sequences as
// plain sampling. The exact distribution over the sequences of 4 tokens
// is the product of the chain's per-step distributions, each given the
// history up to that step; plain and speculative runs over many seeds are
// each checked against it by chi-square (p < 1e-3 fails).
func TestSpecSampledDistribution(t *testing.T) {
	const V, L = 5, 4
	prompt := []int{1, 2}
	runs := 8000
	if testing.Short() {
		runs = 4000
	}
	// The exact distribution, by enumeration.
	exact := map[string]float64{}
	var walk func(h []int, p float64)
	walk = func(h []int, p float64) {
		if len(h) == len(prompt)+L {
			exact[fmt.Sprint(h[len(prompt):])] = p
			return
		}
		s, _ := sample.New(chain)
		probs := s.Probs((&fakeSeq{V: V}).logitsAfter(h), h)
		for tok, q := range probs {
			if q > 0 {
				walk(append(slices.Clone(h), tok), p*q)
			}
		}
	}
	walk(prompt, 1)
	keys := make([]string, 0, len(exact))
	for k := range exact {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := make([]float64, len(keys)+1) // the last cell: sequences of probability 0
	for i, k := range keys {
		want[i] = exact[k]
	}

	for _, depth := range []int{0, 1, 3} { // 3: up to 3 drafts, the window cap
		counts := make([]int, len(want))
		stats := &SpecStats{}
		for seed := range runs {
			opt := GenerateOptions{PrefillRows: 2, Sampling: chain,
				Spec: SpecOptions{Depth: depth, SuffixDraft: 3, Drafter: guessDrafter{V}, Stats: stats}}
			opt.Sampling.Seed = int64(seed)
			out, err := generate(&fakeSeq{V: V}, prompt, L, opt)
			if err != nil {
				t.Fatal(err)
			}
			i, ok := slices.BinarySearch(keys, fmt.Sprint(out))
			if !ok {
				i = len(keys)
			}
			counts[i]++
		}
		r, err := chisq.Check(counts, want)
		if err != nil {
			t.Errorf("depth %d: %v", depth, err)
		}
		t.Logf("depth %d: %d runs over %d sequences of nonzero probability: %v; %d drafts fed, %d accepted, %d windows re-run",
			depth, runs, len(keys), r, stats.Drafted, stats.Accepted, stats.Rerun)
		if depth > 0 && (stats.Accepted == 0 || stats.Rerun == 0) {
			t.Errorf("depth %d: %d drafts accepted, %d windows re-run: both paths must be exercised", depth, stats.Accepted, stats.Rerun)
		}
	}
}

// Greedy with penalties: speculation gives the plain path token for token
// (the penalties see each row's own history, drafts included).
func TestSpecGreedyWithPenalties(t *testing.T) {
	p := sample.Params{RepeatPenalty: 1.8, FrequencyPenalty: 0.5, PenaltyLastN: 4}
	plain, err := generate(&fakeSeq{V: 7}, []int{3, 4, 5}, 30, GenerateOptions{PrefillRows: 3, Sampling: p})
	if err != nil {
		t.Fatal(err)
	}
	stats := &SpecStats{}
	spec, err := generate(&fakeSeq{V: 7}, []int{3, 4, 5}, 30, GenerateOptions{PrefillRows: 3, Sampling: p,
		Spec: SpecOptions{Depth: 3, SuffixDraft: 3, Drafter: guessDrafter{7}, Stats: stats}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(plain, spec) {
		t.Errorf("speculative %v, plain %v", spec, plain)
	}
	if stats.Accepted == 0 || stats.Rerun == 0 {
		t.Errorf("%d accepted, %d re-run: both paths must be exercised", stats.Accepted, stats.Rerun)
	}
	// Without penalties the path differs (else the test proves nothing).
	bare, _ := generate(&fakeSeq{V: 7}, []int{3, 4, 5}, 30, GenerateOptions{PrefillRows: 3})
	if slices.Equal(bare, plain) {
		t.Error("the penalties changed nothing on this path")
	}
}

// EOS and OnToken stops end generation inside a speculative window: the
// tokens up to the stop are returned, each reported once in order, and the
// state holds exactly the prompt and the returned tokens but the last.
func TestStopsInsideAWindow(t *testing.T) {
	prompt := []int{3, 4, 5}
	full, err := generate(&fakeSeq{V: 7}, prompt, 30, GenerateOptions{PrefillRows: 3})
	if err != nil {
		t.Fatal(err)
	}
	for cut := 1; cut < len(full); cut++ {
		for _, how := range []string{"eos", "ontoken", "ignored-eos"} {
			f := &fakeSeq{V: 7}
			var seen []int
			opt := GenerateOptions{PrefillRows: 3, Spec: SpecOptions{Depth: 3, SuffixDraft: 3, Drafter: guessDrafter{7}},
				OnToken: func(id int) error {
					seen = append(seen, id)
					if how == "ontoken" && len(seen) == cut {
						return ErrStop
					}
					return nil
				}}
			want := full[:cut]
			switch how {
			case "eos":
				opt.EOS = []int{full[cut-1]}
				want = full[:slices.Index(full, full[cut-1])+1] // its first occurrence
			case "ignored-eos":
				opt.EOS, opt.IgnoreEOS = []int{full[cut-1]}, true
				want = full
			}
			out, err := generate(f, prompt, 30, opt)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out, want) || !slices.Equal(seen, want) {
				t.Fatalf("%s at %d: returned %v, reported %v, want %v", how, cut, out, seen, want)
			}
			if fed := append(slices.Clone(prompt), out[:len(out)-1]...); !slices.Equal(f.fed, fed) {
				t.Fatalf("%s at %d: the state holds %v, want %v", how, cut, f.fed, fed)
			}
		}
	}
}

// A run that fails midway returns what it generated with the error; an
// OnToken error other than ErrStop is returned as is.
func TestFailureKeepsTokens(t *testing.T) {
	full, _ := generate(&fakeSeq{V: 7}, []int{1}, 10, GenerateOptions{PrefillRows: 1})
	out, err := generate(&fakeSeq{V: 7, failAt: 5}, []int{1}, 10, GenerateOptions{PrefillRows: 1})
	if err == nil || !slices.Equal(out, full[:4]) {
		t.Errorf("failing at window 5: %v, %v; want %v and the error", out, err, full[:4])
	}
	boom := errors.New("boom")
	out, err = generate(&fakeSeq{V: 7}, []int{1}, 10, GenerateOptions{PrefillRows: 1, OnToken: func(id int) error {
		if id == full[2] {
			return boom
		}
		return nil
	}})
	if !errors.Is(err, boom) || !slices.Equal(out, full[:slices.Index(full, full[2])+1]) {
		t.Errorf("OnToken failing: %v, %v", out, err)
	}
	if _, err := generate(&fakeSeq{V: 7}, []int{1}, 10, GenerateOptions{PrefillRows: 1, Sampling: sample.Params{TopP: 2}}); err == nil {
		t.Error("top-p 2 accepted")
	}
}

// A prompt fed in two calls, the second given the first as History, samples
// exactly as the whole prompt in one call: the penalties see the earlier
// tokens (a chat turn that prefills only its new tokens).
func TestHistoryContinuesPenalties(t *testing.T) {
	p := sample.Params{Temperature: 0.8, TopK: 3, RepeatPenalty: 1.5, FrequencyPenalty: 0.4, PenaltyLastN: 8, Seed: 3}
	earlier, prompt := []int{2, 2, 5, 1, 2}, []int{4, 2}
	whole, err := generate(&fakeSeq{V: 7}, append(slices.Clone(earlier), prompt...), 20, GenerateOptions{PrefillRows: 4, Sampling: p})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeSeq{V: 7}
	if _, err := generate(f, earlier, 0, GenerateOptions{PrefillRows: 4}); err != nil {
		t.Fatal(err)
	}
	split, err := generate(f, prompt, 20, GenerateOptions{PrefillRows: 4, Sampling: p, History: earlier})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(whole, split) {
		t.Errorf("in two calls %v, in one %v", split, whole)
	}
	// Without the History the penalties miss the earlier tokens.
	g := &fakeSeq{V: 7}
	generate(g, earlier, 0, GenerateOptions{PrefillRows: 4})
	if blind, _ := generate(g, prompt, 20, GenerateOptions{PrefillRows: 4, Sampling: p}); slices.Equal(blind, whole) {
		t.Error("the history changed nothing: the test proves nothing")
	}
}

// A Sampler passed in continues its draws across calls: two calls of 10
// with one Sampler differ from two calls that each restart from the seed.
func TestSamplerAcrossCalls(t *testing.T) {
	p := sample.Params{Temperature: 1, Seed: 4}
	run := func(opt GenerateOptions) [][]int {
		f := &fakeSeq{V: 7}
		a, _ := generate(f, []int{1}, 10, opt)
		b, _ := generate(f, a[len(a)-1:], 10, opt)
		return [][]int{a, b}
	}
	fresh := run(GenerateOptions{PrefillRows: 1, Sampling: p})
	smp, _ := sample.New(p)
	kept := run(GenerateOptions{PrefillRows: 1, Sampler: smp})
	if !slices.Equal(fresh[0], kept[0]) {
		t.Errorf("first call: %v with a Sampler, %v without", kept[0], fresh[0])
	}
	if slices.Equal(fresh[1], kept[1]) {
		t.Errorf("second call: the kept Sampler restarted from the seed (%v)", kept[1])
	}
}

// The MTP head's windows sit at the session's positions: a prompt fed to a
// continued session (a chat's next turn) starts the head where the trunk is,
// not at 0.
func TestMTPPositionsInAContinuedSession(t *testing.T) {
	f := &fakeSeq{V: 7, mtp: true}
	if _, err := generate(f, []int{1, 2, 3, 4, 5}, 0, GenerateOptions{PrefillRows: 2}); err != nil {
		t.Fatal(err)
	}
	base := f.Pos()
	if _, err := generate(f, []int{6, 1, 2, 3, 4}, 3, GenerateOptions{PrefillRows: 2, Spec: SpecOptions{Depth: 2, MTP: true}}); err != nil {
		t.Fatal(err)
	}
	// Chunks [6 1] [2 3] [4]: the head gets rows at base+0 and base+2 during
	// prefill (each followed by its chained drafts), then the last chunk with
	// the first token at base+4.
	if len(f.mtpPos) == 0 || f.mtpPos[0] != base || slices.Min(f.mtpPos) < base ||
		!slices.Contains(f.mtpPos, base+2) || !slices.Contains(f.mtpPos, base+4) {
		t.Errorf("MTP windows at %v, want the first at %d, none before, and some at %d and %d", f.mtpPos, base, base+2, base+4)
	}
}

// TestOnTokenLogits: each committed token comes with the raw row of logits
// it was chosen from — the fake model's logits after the prompt and the
// tokens before it, computed here on their own — on the plain path and with
// drafts accepted and rejected, greedy and sampled.
func TestOnTokenLogits(t *testing.T) {
	prompt := []int{3, 4, 5}
	for _, c := range []struct {
		name  string
		depth int
		p     sample.Params
	}{{"plain greedy", 0, sample.Params{}}, {"spec greedy", 3, sample.Params{}},
		{"plain sampled", 0, chain}, {"spec sampled", 3, chain}} {
		stats := &SpecStats{}
		var toks []int
		var rows [][]float32
		opt := GenerateOptions{PrefillRows: 2, Sampling: c.p,
			Spec: SpecOptions{Depth: c.depth, SuffixDraft: 3, Drafter: guessDrafter{7}, Stats: stats},
			OnTokenLogits: func(id int, row []float32) {
				toks = append(toks, id)
				rows = append(rows, slices.Clone(row))
			}}
		opt.Sampling.Seed = 7
		out, err := generate(&fakeSeq{V: 7}, prompt, 40, opt)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(toks, out) {
			t.Fatalf("%s: OnTokenLogits saw %v, Generate returned %v", c.name, toks, out)
		}
		for i := range out {
			h := append(slices.Clone(prompt), out[:i]...)
			if want := (&fakeSeq{V: 7}).logitsAfter(h); !slices.Equal(rows[i], want) {
				t.Fatalf("%s: token %d: row %v, want the logits after %v: %v", c.name, i, rows[i], h, want)
			}
		}
		if c.depth > 0 && (stats.Accepted == 0 || stats.Rerun == 0) {
			t.Errorf("%s: %d accepted, %d re-run: both paths must be exercised", c.name, stats.Accepted, stats.Rerun)
		}
	}
}

// The MTP head is fed every committed position exactly once, in order, with
// the trunk's hidden row of that position, however often it skips: the rows
// of windows after which it did not run wait on the host and are fed, in
// order, before the next window's (fakeSeq.MTPWindow refuses a row that
// carries another position's hidden row). That holds through prefill
// windows, rejected drafts and a second call on the same session.
func TestHeadFedEveryPosition(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(step, pending int) bool
	}{
		{"always", func(int, int) bool { return true }},
		{"every third step", func(step, _ int) bool { return step%3 == 0 }},
		{"after long skips", func(step, _ int) bool { return step%11 == 10 }},
	} {
		restore := SetHeadSchedule(c.run)
		f := &fakeSeq{V: 7, mtp: true}
		opt := GenerateOptions{PrefillRows: 3, IgnoreEOS: true, Spec: SpecOptions{Depth: 2, MTP: true}}
		want, err := generate(&fakeSeq{V: 7}, []int{1, 2, 3, 4, 5, 6, 0}, 30, GenerateOptions{PrefillRows: 3, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		got, err := generate(f, []int{1, 2, 3, 4, 5, 6, 0}, 30, opt)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%s: tokens %v, plain decoding %v", c.name, got, want)
		}
		// A second call continues the session, rewound into the rows the
		// head was not fed where there are some (a server's prefix cache):
		// the head resumes where those rows start, and the rows past the
		// rewind are dropped.
		next := got[len(got)-1]
		if h := &f.head; h.pendingRows() > 2 {
			r := h.next + 1
			f.fed, next = f.fed[:r], f.fed[r]
		} else if c.name == "after long skips" {
			t.Fatalf("%s: %d rows pending at the end: the rewind is not exercised", c.name, h.pendingRows())
		}
		if _, err := generate(f, []int{next, 3, 4}, 20, opt); err != nil {
			t.Fatalf("%s, second call: %v", c.name, err)
		}
		restore()
		fed := slices.Clone(f.headFed)
		for i, p := range fed {
			if p != i {
				t.Fatalf("%s: the head was fed positions %v, want 0, 1, 2, … in order, each once", c.name, fed)
			}
		}
		if len(fed)+len(f.head.tokens) < f.Pos()-1 {
			t.Errorf("%s: %d positions fed and %d pending of %d consumed", c.name, len(fed), len(f.head.tokens), f.Pos())
		}
	}
}
