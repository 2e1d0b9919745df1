package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/engine/spec"
)

// GenerateOptions control Generate.
type GenerateOptions struct {
	PrefillRows int                       // rows per prefill window (≤ the largest shape)
	OnLogits    func(row []float32) error // called with the logits of every fed token, in order
	// Sampling is the sampling chain; the zero value is greedy.
	Sampling sample.Params
	// Sampler, when set, is used instead of a fresh one made from Sampling,
	// so its draws continue across calls (a chat's turns) instead of
	// restarting from the seed.
	Sampler *sample.Sampler
	// History are the tokens the session consumed before this prompt (a
	// chat's earlier turns, when each turn feeds only its new tokens): the
	// penalties' window and the suffix drafter see them as if fed now.
	History []int
	// EOS are the ids that end generation (the EOS token is the last one
	// returned), unless IgnoreEOS.
	EOS       []int
	IgnoreEOS bool
	// OnToken is called with each token as soon as it is committed, in
	// order (a streaming caller prints it). Returning ErrStop ends
	// generation cleanly after that token; any other error ends it with
	// that error.
	OnToken func(id int) error
	// OnTokenLogits, when set, is called just before OnToken with each
	// committed token and the row of logits it was chosen from: the model's
	// raw logits at that position, before the penalties, temperature and
	// filters (a speculative window's verified row, which equals the plain
	// decode's). The row is valid only during the call. Nil costs nothing.
	OnTokenLogits func(id int, row []float32)
	// Turn, when set, is called between windows: before each prefill
	// window but the first and before each decode step (a step's drafted
	// window, its re-run and the MTP head's windows run in one turn), with
	// the prompt tokens still to feed (0 once decoding). A scheduler that
	// runs sessions of several lanes on one model hands the model to
	// another session there and returns when this one may go on; Generate
	// itself starts in the caller's turn. An error ends generation with it.
	Turn func(prefillLeft int) error
	// Constraint, when set, restricts the tokens to a grammar
	// (runtime/engine/grammar): the sampler masks what it refuses and
	// advances it with each committed token, drafts it refuses are not fed,
	// and generation ends once it is finished (nothing may follow).
	Constraint sample.Constraint
	Spec       SpecOptions
}

// ErrContext is the error a prompt or a window that does not fit in the
// model's context wraps.
var ErrContext = errors.New("context length exceeded")

// after is " after the N tokens the session holds", or "" at position 0.
func after(pos int) string {
	if pos == 0 {
		return ""
	}
	return fmt.Sprintf(" after the %d tokens the session holds", pos)
}

// ErrStop, returned by GenerateOptions.OnToken, ends generation after the
// token it was called with; Generate then returns no error.
var ErrStop = errors.New("generation stopped by the caller")

// SpecOptions control speculative decoding. The output is the same with it
// on or off (greedy: token for token; sampled: in distribution).
type SpecOptions struct {
	// Depth: 0 off; k > 0 a fixed number of drafts per window; Auto lets the
	// spec gate choose each step.
	Depth int
	// SuffixDraft is the most suffix (prompt-lookup) drafts per window; 0
	// turns the suffix drafter off.
	SuffixDraft int
	// Drafter replaces the suffix drafter (an external drafter); nil: the
	// suffix drafter, spec.DefaultSuffix.
	Drafter spec.Drafter
	// MTP drafts with the model's MTP head when it has one.
	MTP bool
	// Gate is the spec gate Auto uses; nil makes a fresh one. Pass one in to
	// read its report afterwards.
	Gate *spec.Gate
	// Stats, when set, counts what speculation did.
	Stats *SpecStats
}

// SpecStats counts decode windows, drafts fed and drafts accepted, windows
// re-run after a rejection, the rows decode windows fed (re-runs
// included) and the rows the MTP head ran (its catch-ups and chained drafts
// included): the work speculation cost, whatever the machine's timings.
type SpecStats struct {
	Windows, Drafted, Accepted, Rerun, Rows, HeadRows int
}

// Auto is SpecOptions.Depth for "let the gate decide".
const Auto = -1

// Generate feeds the prompt in windows of up to PrefillRows rows, then decodes
// up to n tokens through the sampling chain (greedy at temperature 0),
// stopping early at an EOS id or when OnToken says so. With speculation on,
// a window carries the last token plus drafts; each row is verified against
// the chain's distribution given the history up to that row, the kept prefix
// is committed and a rejected row leaves no trace in the state.
//
// It returns the tokens generated, also when it fails midway (then with the
// error). Afterwards the session has consumed the prompt and every returned
// token but the last, as plain one-token decoding leaves it.
func (s *Session) Generate(prompt []int, n int, opt GenerateOptions) ([]int, error) {
	return generate(&sessionSeq{Session: s}, prompt, n, opt)
}

func generate(seq sequence, prompt []int, n int, opt GenerateOptions) ([]int, error) {
	if len(prompt) == 0 {
		return nil, fmt.Errorf("the prompt is empty: give at least one token")
	}
	if opt.PrefillRows < 1 {
		return nil, fmt.Errorf("prefill rows must be ≥ 1, got %d", opt.PrefillRows)
	}
	smp := opt.Sampler
	if smp == nil {
		var err error
		if smp, err = sample.New(opt.Sampling); err != nil {
			return nil, fmt.Errorf("sampling: %w", err)
		}
	}
	if opt.Constraint != nil {
		smp.SetConstraint(opt.Constraint)
		defer smp.SetConstraint(nil)
	}
	d := &decoder{s: seq, lim: seq.limits(), opt: opt, smp: smp}
	if ss, ok := seq.(*sessionSeq); ok && opt.OnLogits == nil {
		// The decoder keeps no trunk row past the next trunk window (it
		// samples, verifies and reports each before feeding on), and
		// OnTokenLogits rows are valid only during the call.
		ss.reuseLogits = true
		defer func() { ss.reuseLogits = false }()
	}
	if at := seq.Pos(); at+len(prompt) > d.lim.context {
		// Refused before any window runs: a long prompt would otherwise
		// fail only after prefilling all that fits.
		return nil, fmt.Errorf("%w: the prompt is %d tokens%s, but model %s runs with a context of %d tokens", ErrContext, len(prompt), after(at), d.lim.name, d.lim.context)
	}
	if err := d.setup(); err != nil {
		return nil, err
	}
	return d.run(prompt, n)
}

// decoder is the state of one Generate call.
type decoder struct {
	s        sequence
	lim      seqLimits
	opt      GenerateOptions
	smp      *sample.Sampler
	gate     *spec.Gate
	maxDraft int
	useMTP   bool
	hist     []int // prompt and output, for the drafters and the penalties
	out      []int // the tokens committed
	rowHist  []int // scratch: the penalty window plus a window's drafts
	mtpDraft []int // the MTP head's drafts for the next window
	mtpProb  []float64
	mtpChain int         // how many drafts the head chains: the fixed depth, or all a window holds under the gate
	head     *headFeed   // the rows the head has not been fed yet
	shadow   spec.Shadow // a plain step's drafts, judged by the tokens that come: the gate learns acceptance while it declines
	// argmaxOnly: greedy without penalties or a grammar, and no caller
	// wants the logits, so each window's tokens are the device's argmax
	// rows (Session.WindowArgmax) and its logits never leave the device.
	argmaxOnly bool
}

// windowOut is what a window gives the decode loop: its rows of logits, or,
// under argmaxOnly, greedy's choice for each row instead.
type windowOut struct {
	logits [][]float32
	best   []int
}

// head is the window's first n rows.
func (w windowOut) head(n int) windowOut {
	if w.best != nil {
		return windowOut{best: w.best[:n]}
	}
	return windowOut{logits: w.logits[:n]}
}

// last is the window's last row.
func (w windowOut) last() windowOut {
	if w.best != nil {
		return windowOut{best: w.best[len(w.best)-1:]}
	}
	return windowOut{logits: w.logits[len(w.logits)-1:]}
}

// window feeds rows (see windowOut).
func (d *decoder) window(rows []int) (windowOut, error) {
	if d.argmaxOnly {
		best, err := d.s.WindowArgmax(rows)
		return windowOut{best: best}, err
	}
	logits, err := d.s.Window(rows)
	return windowOut{logits: logits}, err
}

// sample is the token row i of w chooses, the penalties seeing history.
func (d *decoder) sample(w windowOut, i int, history []int) int {
	if w.best != nil {
		return w.best[i]
	}
	return d.smp.Sample(w.logits[i], history)
}

// verify is Sampler.Verify on row i of w.
func (d *decoder) verify(w windowOut, i int, history []int, draft int) (int, bool) {
	if w.best != nil {
		return w.best[i], w.best[i] == draft
	}
	return d.smp.Verify(w.logits[i], history, draft)
}

func (d *decoder) setup() error {
	sp := d.opt.Spec
	m := d.lim
	d.maxDraft = m.shapes[0] - 1
	for _, t := range m.shapes {
		if t <= m.maxDecodeRows {
			d.maxDraft = max(d.maxDraft, t-1)
		}
	}
	switch {
	case sp.Depth == Auto:
	case sp.Depth < 0:
		return fmt.Errorf("speculation depth %d: expected 0 (off), a positive number of drafts, or auto", sp.Depth)
	case sp.Depth > d.maxDraft:
		return fmt.Errorf("speculation depth %d: model %s verifies at most %d drafts per window (windows.max_decode_rows = %d)", sp.Depth, m.name, d.maxDraft, m.maxDecodeRows)
	}
	o := d.opt
	d.argmaxOnly = d.smp.Params().PlainGreedy() && o.Constraint == nil && o.OnLogits == nil && o.OnTokenLogits == nil
	d.useMTP = sp.MTP && m.hasMTP && sp.Depth != 0
	d.mtpChain = d.maxDraft
	if sp.Depth > 0 {
		d.mtpChain = sp.Depth // drafts past the depth would never be fed
	}
	d.head = d.s.headFeed()
	d.head.s, d.head.maxRows = d.s, max(m.mtpRows, 1)
	if sp.Depth == Auto {
		d.gate = sp.Gate
		if d.gate == nil {
			d.gate = spec.NewGate(d.maxDraft)
		}
		d.gate.RerunShare = 1 // a rejection restores the snapshot and re-runs the kept rows
		d.mtpChain = min(d.mtpChain, d.gate.MaxDepth)
	}
	return nil
}

func (d *decoder) emit(w windowOut) error {
	if d.opt.OnLogits == nil {
		return nil
	}
	for _, r := range w.logits {
		if err := d.opt.OnLogits(r); err != nil {
			return err
		}
	}
	return nil
}

// commit hands the window's tokens to the output in order and reports how
// many it took: all of them, or fewer when one is an EOS id or OnToken
// stops (that token is the last taken; err is OnToken's other errors).
// rows[i] is the row of logits toks[i] was chosen from.
func (d *decoder) commit(toks []int, rows [][]float32) (taken int, stop bool, err error) {
	for i, t := range toks {
		d.out = append(d.out, t)
		if d.opt.OnTokenLogits != nil {
			d.opt.OnTokenLogits(t, rows[i])
		}
		if d.opt.OnToken != nil {
			if err := d.opt.OnToken(t); err != nil {
				if errors.Is(err, ErrStop) {
					return i + 1, true, nil
				}
				return i + 1, true, err
			}
		}
		if !d.opt.IgnoreEOS && slices.Contains(d.opt.EOS, t) {
			return i + 1, true, nil
		}
	}
	if c := d.opt.Constraint; c != nil && c.Finished() {
		// Verification stops at the row that finishes the grammar, so
		// this is the last token's doing.
		return len(toks), true, nil
	}
	return len(toks), false, nil
}

// rowHistory returns, for a window verifying drafts, the history the
// penalties see at row i: the last PenaltyLastN tokens of hist (cur
// included) and drafts[:i]. The result is valid until the next call.
func (d *decoder) rowHistory(drafts []int) func(i int) []int {
	base := d.hist
	if n := d.smp.Params().PenaltyLastN; n >= 0 && n < len(base) {
		base = base[len(base)-n:]
	}
	d.rowHist = append(append(d.rowHist[:0], base...), drafts...)
	return func(i int) []int { return d.rowHist[:len(base)+i] }
}

func (d *decoder) run(prompt []int, n int) ([]int, error) {
	s := d.s
	rows := d.opt.PrefillRows
	base := s.Pos()           // a continued session (a chat's next turn) starts past 0
	var last windowOut        // the last window's last row
	prefetchNgrams(s, prompt) // every prefill window's n-gram rows, read while the first windows run
	var chunks [][]int
	for i := 0; i < len(prompt); i += rows {
		chunks = append(chunks, prompt[i:min(i+rows, len(prompt))])
	}
	fed := 0 // the prompt tokens fed
	if ss, ok := s.(*sessionSeq); ok && !d.useMTP && ss.layerMajor(chunks) {
		// Streamed experts: every window through a layer before the next
		// layer (layermajor.go), the scheduler's turns between layers.
		all, err := ss.prefillLayerMajor(chunks, func() error { return d.turn(len(prompt)) })
		if err != nil {
			return nil, err
		}
		for _, logits := range all {
			if err := d.emit(windowOut{logits: logits}); err != nil {
				return nil, err
			}
		}
		last = windowOut{logits: all[len(all)-1]}.last()
		fed = len(prompt)
	}
	for i := fed; i < len(prompt); i += rows {
		if i > 0 {
			if err := d.turn(len(prompt) - i); err != nil {
				return nil, err
			}
		}
		chunk := prompt[i:min(i+rows, len(prompt))]
		start := time.Now()
		w, err := d.window(chunk)
		if err != nil {
			return nil, err
		}
		if d.gate != nil && len(chunk) <= d.maxDraft+1 && !d.s.coldWindow() {
			// A window of a decode shape (every row's logits): what a
			// decode window of that size costs, before any is measured.
			d.gate.ObservePrefill(len(chunk), time.Since(start).Seconds())
		}
		if err := d.emit(w); err != nil {
			return nil, err
		}
		last = w.last()
		if d.useMTP && i+rows < len(prompt) {
			// The head needs every position in its caches; the last chunk's
			// next token is only known once sampled, below. Under the gate
			// the rows wait until the head is wanted.
			if err := d.feedHead(prompt[i+1:i+1+len(chunk)], base+i, d.gate == nil, false); err != nil {
				return nil, err
			}
		}
	}
	d.hist = append(append(d.hist, d.opt.History...), prompt...)
	if n == 0 {
		return nil, nil
	}
	cur := d.sample(last, 0, d.hist)
	if _, stop, err := d.commit([]int{cur}, last.logits); stop {
		return d.out, err
	}
	if d.useMTP {
		lastChunk := (len(prompt) - 1) / rows * rows
		next := append(append([]int(nil), prompt[lastChunk+1:]...), cur)
		if err := d.afterWindow(next, base+lastChunk, len(d.out) >= n); err != nil {
			return d.out, err
		}
	}
	for len(d.out) < n {
		if err := d.turn(0); err != nil {
			return d.out, err
		}
		d.hist = append(d.hist, cur)
		if stop, err := d.step(cur, n-len(d.out)); stop || err != nil {
			return d.out, err
		}
		cur = d.out[len(d.out)-1]
	}
	return d.out, nil
}

// turn waits for the scheduler's turn (GenerateOptions.Turn), if any.
func (d *decoder) turn(prefillLeft int) error {
	if d.opt.Turn == nil {
		return nil
	}
	return d.opt.Turn(prefillLeft)
}

// drafts chooses this step's draft source and drafts.
func (d *decoder) drafts(want int) ([]int, []float64, int) {
	sp := d.opt.Spec
	var sufD []int
	var sufP []float64
	if sp.SuffixDraft > 0 {
		var drafter spec.Drafter = spec.DefaultSuffix
		if sp.Drafter != nil {
			drafter = sp.Drafter
		}
		sufD, sufP = drafter.Draft(d.hist, min(sp.SuffixDraft, d.maxDraft))
	}
	mtpD, mtpP := d.mtpDraft, d.mtpProb
	if d.gate == nil {
		// Fixed depth: the MTP head when it drafts, else the suffix drafter.
		if len(mtpD) > 0 {
			return mtpD, mtpP, spec.SourceMTP
		}
		return sufD, sufP, spec.SourceSuffix
	}
	// Auto: the source whose best window is worth more.
	best := func(src int, probs []float64, avail int) float64 {
		v := 0.0
		for k := 1; k <= min(avail, want, d.gate.MaxDepth); k++ {
			v = max(v, d.gate.Value(src, k, probs))
		}
		return v
	}
	if len(mtpD) > 0 && best(spec.SourceMTP, mtpP, len(mtpD)) >= best(spec.SourceSuffix, sufP, len(sufD)) {
		return mtpD, mtpP, spec.SourceMTP
	}
	return sufD, sufP, spec.SourceSuffix
}

// step feeds cur plus drafts in one window and commits the tokens it yields
// (1 + accepted drafts); stop says generation ended among them.
func (d *decoder) step(cur, remaining int) (stop bool, err error) {
	s := d.s
	// Near the end of the context a window carries only the drafts that
	// fit, so speculation stops where plain decoding would.
	remaining = max(min(remaining, d.lim.context-s.Pos()), 1)
	drafts, probs, source := d.drafts(remaining - 1)
	k := 0
	switch {
	case d.gate != nil:
		k = d.gate.Pick(source, min(len(drafts), remaining-1), probs)
	case d.opt.Spec.Depth > 0:
		k = min(d.opt.Spec.Depth, len(drafts), remaining-1)
	}
	if c := d.opt.Constraint; c != nil {
		// A draft the grammar refuses would be rejected: feed none from it.
		k = c.Admit(drafts[:k])
	}
	rows := append([]int{cur}, drafts[:k]...)
	prefetchNgrams(s, rows) // read while the state is snapshotted
	pos := s.Pos()
	start := time.Now() // the snapshot is part of what a drafted window costs
	if k > 0 {
		s.mark()
	}
	w, err := d.window(rows)
	if err != nil {
		return true, err
	}

	// Verify: row i's token is the chain's choice after rows[:i+1], the
	// penalties seeing the history up to that row; draft i stands iff it
	// is that choice (greedy) or survives speculative sampling against the
	// chain's distribution, so the tokens are distributed as without drafts.
	hist := d.rowHistory(drafts[:k])
	var got []int
	for i := range rows {
		var tok int
		ok := false
		if i < k {
			tok, ok = d.verify(w, i, hist(i), drafts[i])
		} else {
			tok = d.sample(w, i, hist(i))
		}
		got = append(got, tok)
		if !ok || d.opt.Constraint != nil && d.opt.Constraint.Finished() {
			break
		}
	}
	kept := len(got) // rows whose tokens stand: the accepted drafts and cur
	if st := d.opt.Spec.Stats; st != nil {
		st.Windows++
		st.Drafted += k
		st.Accepted += kept - 1
		st.Rows += len(rows)
		if kept < len(rows) {
			st.Rerun++
			st.Rows += kept
		}
	}
	d.observeWindow(len(rows), start)
	if d.gate != nil && k > 0 {
		d.gate.ObserveVerify(source, k, kept-1, probs)
	}
	if kept < len(rows) {
		// Rejected rows must leave no trace: put the rolling state back and
		// feed only the kept rows (their logits are the same, row by row).
		start := time.Now()
		if w, err = d.refeed(rows[:kept]); err != nil {
			return true, err
		}
		if d.gate != nil && !d.s.coldWindow() {
			// Priced apart from the window: the gate charges each window
			// size the re-run it expects at the current acceptance.
			d.gate.ObserveRerun(kept, time.Since(start).Seconds())
		}
	}
	d.hist = append(d.hist, got[:len(got)-1]...)
	taken, stop, cerr := d.commit(got, w.logits)
	if taken < kept {
		// Generation ended inside the window: keep in the state only the
		// rows up to the last token taken (which itself is not fed).
		if w, err = d.refeed(rows[:taken]); err != nil {
			return true, errors.Join(cerr, err)
		}
		kept = taken
	}
	if err := d.emit(w.head(kept)); err != nil || stop {
		return true, errors.Join(cerr, err)
	}
	if d.gate != nil {
		if !d.shadow.Pending() && kept == len(rows) {
			// Every fed draft stood (or none was fed): the drafts past them
			// are judged by the tokens that come, from the one after got's
			// accepted drafts on.
			n := min(len(drafts), d.maxDraft, remaining-1)
			d.shadow.Start(source, drafts[:n], probs, k)
			d.shadow.Advance(d.gate, got[k:])
		} else {
			d.shadow.Advance(d.gate, got)
		}
	}
	if d.useMTP {
		if err := d.afterWindow(got, pos, len(got) >= remaining); err != nil {
			return true, err
		}
	}
	return false, nil
}

// refeed returns to the state before the step's window and feeds rows, the
// part of it that stands.
func (d *decoder) refeed(rows []int) (windowOut, error) {
	d.s.rewind()
	return d.window(rows)
}

// headSchedule, when set (tests), decides after each window whether the
// MTP head runs, instead of the gate.
var headSchedule func(step, pending int) bool

// afterWindow gives the MTP head the rows the trunk just committed (row t at
// pos+t with the token after it, next[t]) and has it draft the next window,
// or, under the gate when drafting is not worth the head's windows, keeps
// the rows for later and leaves the next window without MTP drafts. After
// the last window of the call (last) the rows are kept: no window follows
// to draft for, and a later call on the session catches them up if its
// head runs.
func (d *decoder) afterWindow(next []int, pos int, last bool) error {
	run := true
	switch {
	case last:
		run = false
	case headSchedule != nil:
		run = headSchedule(len(d.out), d.head.pendingRows())
	case d.gate != nil:
		run = d.gate.RunHead(d.head.pendingRows())
	}
	return d.feedHead(next, pos, run, run)
}

// maxPendingBytes bounds the host memory of the rows the head was not fed:
// past it they are fed (without drafting) whatever the gate says.
const maxPendingBytes = 64 << 20

// feedHead runs the MTP head over the rows it was not fed and the trunk
// window's rows (row t at pos+t with next[t]) when run, and chains drafts
// for the next window from its last row when draft; else it keeps the rows
// for a later feed.
func (d *decoder) feedHead(next []int, pos int, run, draft bool) error {
	d.mtpDraft, d.mtpProb = d.mtpDraft[:0], d.mtpProb[:0]
	if !run {
		if err := d.head.stash(next, pos); err != nil {
			return err
		}
		if d.head.pendingBytes() < maxPendingBytes {
			return nil
		}
		next = nil
	}
	start := time.Now()
	pending := d.head.pendingRows()
	logits, rows, err := d.head.feed(next, pos)
	if err != nil {
		return fmt.Errorf("MTP head: %w", err)
	}
	fed := time.Since(start).Seconds()
	if st := d.opt.Spec.Stats; st != nil {
		st.HeadRows += rows
	}
	if d.gate != nil {
		d.gate.ObserveHeadFeed(rows, fed)
	}
	if !draft || len(logits) == 0 {
		return nil
	}
	start = time.Now()
	if err := d.chain(logits[len(logits)-1], d.head.next); err != nil {
		return err
	}
	if d.gate != nil {
		// The drafts cost the chain and this window's share of the feed;
		// the catch-up of the pending rows is priced apart (RunHead).
		own := fed * float64(rows-pending) / float64(rows)
		d.gate.ObserveDrafting(spec.SourceMTP, len(d.mtpDraft), own+time.Since(start).Seconds())
	}
	return nil
}

// chain drafts from the head's row of logits for position p, feeding the
// head its own last hidden row with each draft for the next.
func (d *decoder) chain(row []float32, p int) error {
	for {
		tok := Argmax(row)
		d.mtpDraft = append(d.mtpDraft, tok)
		d.mtpProb = append(d.mtpProb, spec.Softmax(row, 1)[tok])
		if len(d.mtpDraft) >= d.mtpChain || p >= d.lim.context {
			return nil
		}
		chained, err := d.s.MTPWindow([]int{tok}, p)
		if err != nil {
			return fmt.Errorf("MTP head: %w", err)
		}
		if st := d.opt.Spec.Stats; st != nil {
			st.HeadRows++
		}
		row, p = chained[0], p+1
	}
}

func (d *decoder) observeWindow(rows int, start time.Time) {
	if d.gate != nil && !d.s.coldWindow() {
		d.gate.ObserveWindow(rows, time.Since(start).Seconds())
	}
}
