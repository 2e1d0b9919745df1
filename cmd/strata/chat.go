package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/text/chat"
)

// chatSession is what a chat needs of engine.Session.
type chatSession interface {
	Pos() int
	Generate(prompt []int, n int, opt engine.GenerateOptions) ([]int, error)
	Mark() sessionMark
}

// sessionMark is a point the session can return to.
type sessionMark interface {
	Pos() int
	Rewind() error
}

// engineSession adapts engine.Session's Mark and Rewind.
type engineSession struct{ *engine.Session }

func (e engineSession) Mark() sessionMark { return engineMark{e.Session, e.Session.Mark()} }

type engineMark struct {
	s *engine.Session
	m *engine.Mark
}

func (m engineMark) Pos() int      { return m.m.Pos() }
func (m engineMark) Rewind() error { return m.s.Rewind(m.m) }

// chat holds an interactive conversation on stdin. The session keeps the
// model state between turns, so a turn prefills only what is new: the text
// the template renders after what the session has already consumed. When the
// template renders the earlier turns differently from what the model saw
// (Qwen3 drops the previous reply's thinking), the session rewinds to the
// mark taken before that reply (when the re-rendered conversation still
// agrees with everything before it) and prefills the re-rendered reply and
// the new turn; failing that it starts over on the whole conversation. Either
// way the state equals a fresh prefill of the conversation as rendered.
func (t *textRun) chat(name string, newSession func() chatSession, s chatSession, gopt engine.GenerateOptions, stdout, stderr io.Writer) error {
	c := &conversation{t: t, newSession: newSession, s: s, gopt: gopt,
		// Marking needs the prompt's last token fed apart; with MTP drafting
		// that would leave the head's caches a gap, so it is done without.
		marks: gopt.Spec.Depth == 0 || !gopt.Spec.MTP}
	if *t.f.system != "" {
		c.conv = append(c.conv, chat.Message{Role: "system", Content: *t.f.system})
	}
	c.system = len(c.conv)
	if err := c.newSampler(); err != nil {
		return err
	}
	sigs, stopSignals := chatInterrupts()
	defer stopSignals()
	c.sigs = sigs
	in := newTurnReader(stdin)
	defer in.close()
	fmt.Fprintf(stderr, "strata: chatting with %s (/reset starts over; Ctrl-C stops a reply; /exit, Ctrl-D or Ctrl-C at the prompt ends)\n", name)
	for turn := 1; ; {
		line, ok, err := in.next(sigs, stderr)
		if err != nil || !ok {
			return err
		}
		switch strings.TrimSpace(line) {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		case "/reset":
			if err := c.reset(); err != nil {
				return err
			}
			fmt.Fprintln(stderr, "strata: conversation reset")
			continue
		}
		c.conv = append(c.conv, chat.Message{Role: "user", Content: line})
		rendered, err := t.tm.Render(c.conv, t.chatOptions(), *t.f.parseSpecial)
		if err != nil { // the template refuses this conversation: say why, drop the turn
			fmt.Fprintf(stderr, "strata: %v\n", err)
			c.conv = c.conv[:len(c.conv)-1]
			continue
		}
		prompt, kept, err := c.prompt(rendered, stderr)
		if err != nil {
			return err
		}
		if n := kept + len(prompt); t.context > 0 && n >= t.context { // no room for a reply: say so, keep chatting
			fmt.Fprintf(stderr, "strata: this turn does not fit: the conversation would be %d tokens and the context is %d; /reset starts over (or run with a larger --context)\n", n, t.context)
			c.conv = c.conv[:len(c.conv)-1]
			continue
		}
		if c.s.Pos() != kept {
			return fmt.Errorf("turn %d: the session is at position %d but has %d tokens of the conversation", turn, c.s.Pos(), kept)
		}
		if err := c.reply(turn, rendered, prompt, kept, stdout, stderr); err != nil {
			return err
		}
		turn++
	}
}

// conversation is a chat's state between turns.
type conversation struct {
	t          *textRun
	newSession func() chatSession
	s          chatSession
	gopt       engine.GenerateOptions
	conv       []chat.Message
	system     int         // the messages /reset keeps: the system message
	seen       []int       // the tokens the session has consumed
	mark       sessionMark // the session before the last reply
	marks      bool        // whether to mark the session before each reply
	sigs       <-chan os.Signal
}

// interrupted reports a Ctrl-C that came since the last look.
func (c *conversation) interrupted() bool {
	select {
	case <-c.sigs:
		return true
	default:
		return false
	}
}

// newSampler gives the conversation a fresh sampler. One sampler serves
// the whole conversation: its draws go on across turns (a fresh one per
// turn would replay the seed's first draws); /reset starts it over with the
// conversation.
func (c *conversation) newSampler() error {
	smp, err := sample.New(c.gopt.Sampling)
	if err != nil {
		return fmt.Errorf("sampling: %w", err)
	}
	c.gopt.Sampler = smp
	return nil
}

// reset starts over: the system message only, a fresh session and sampler.
func (c *conversation) reset() error {
	c.conv, c.seen, c.mark = c.conv[:c.system], nil, nil
	c.s = c.newSession()
	return c.newSampler()
}

// chatInterrupts is where a chat hears Ctrl-C (a test replaces it): SIGINT
// stops the reply being generated, or at the prompt ends the chat. It takes
// SIGINT from the handler that removes temporary files and exits (strata
// writes no file while chatting). A second Ctrl-C before the chat has acted
// on the first (a long prefill makes no tokens to stop at) exits at once.
var chatInterrupts = func() (<-chan os.Signal, func()) {
	signal.Reset(os.Interrupt)
	raw := make(chan os.Signal, 1)
	signal.Notify(raw, os.Interrupt)
	sigs := make(chan os.Signal, 1)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-raw:
				select {
				case sigs <- s:
				default: // the last one is still pending: twice quickly
					fmt.Fprintln(os.Stderr)
					os.Exit(130)
				}
			case <-done:
				return
			}
		}
	}()
	return sigs, func() { signal.Stop(raw); close(done) }
}

// errInterrupted ends a chat on Ctrl-C at the prompt: exit status 130, as
// a shell reports a process SIGINT ended.
var errInterrupted = exitStatus{130, "interrupted"}

// exitStatus is an error that ends strata with its own exit status.
type exitStatus struct {
	code int
	msg  string
}

func (e exitStatus) Error() string { return e.msg }

// turnReader reads the user's lines on a goroutine, so that the prompt
// can wait for a line and for Ctrl-C at once.
type turnReader struct {
	lines chan turnLine
	done  chan struct{}
}

type turnLine struct {
	s   string
	err error // io.EOF at the end of stdin
}

func newTurnReader(r io.Reader) *turnReader {
	t := &turnReader{lines: make(chan turnLine), done: make(chan struct{})}
	go func() {
		in := bufio.NewReader(r)
		for {
			line, err := in.ReadString('\n')
			if line != "" || err != nil {
				if line != "" && errors.Is(err, io.EOF) {
					err = nil // the last line, unterminated; EOF comes next
				}
				select {
				case t.lines <- turnLine{line, err}:
				case <-t.done:
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	return t
}

func (t *turnReader) close() { close(t.done) }

// next reads the user's next line; ok is false at the end of stdin. Ctrl-C
// at the prompt ends the chat (errInterrupted).
func (t *turnReader) next(sigs <-chan os.Signal, stderr io.Writer) (line string, ok bool, err error) {
	fmt.Fprint(stderr, "> ")
	select {
	case l := <-t.lines:
		if l.err != nil && !errors.Is(l.err, io.EOF) {
			return "", false, fmt.Errorf("reading stdin: %w", l.err)
		}
		if l.err != nil {
			fmt.Fprintln(stderr)
			return "", false, nil
		}
		return strings.TrimRight(l.s, "\r\n"), true, nil
	case <-sigs:
		fmt.Fprintln(stderr)
		return "", false, errInterrupted
	}
}

// prompt is what this turn feeds the session: the rendered conversation
// after the tokens the session holds (kept of them), rewinding to the mark
// or starting a fresh session when the template re-rendered what it holds.
func (c *conversation) prompt(rendered string, stderr io.Writer) (prompt []int, kept int, err error) {
	tok := c.t.tm.Tok
	kept = len(c.seen)
	if fed := tok.Decode(c.seen); kept > 0 && strings.HasPrefix(rendered, fed) {
		return c.t.tm.EncodeRendered(rendered[len(fed):]), kept, nil
	}
	// Escaped special-token text in a message (see text.Model.Render) never
	// equals the decoded tokens, so such a conversation comes here: the
	// ids still agree up to the mark.
	whole := c.t.tm.EncodeRendered(rendered)
	switch {
	case kept == 0:
		return whole, kept, nil
	case c.mark != nil && c.mark.Pos() <= commonPrefix(whole, c.seen):
		if err := c.mark.Rewind(); err != nil {
			return nil, 0, err
		}
		kept = c.mark.Pos()
		fmt.Fprintf(stderr, "strata: the template renders the last reply differently from what the model saw; rewound to position %d, before it\n", kept)
		c.seen = c.seen[:kept]
		return whole[kept:], kept, nil
	}
	fmt.Fprintln(stderr, "strata: the template renders the earlier turns differently from what the model saw; prefilling the whole conversation again")
	c.s = c.newSession()
	c.seen = nil
	return whole, 0, nil
}

// reply feeds the turn's prompt (marking the session before the
// assistant's header when it can), streams the reply and adds it to the
// conversation.
func (c *conversation) reply(turn int, rendered string, prompt []int, kept int, stdout, stderr io.Writer) error {
	t, s := c.t, c.s
	p := newTextPrinter(t.tm, stdout, t.stops)
	stopped := false // by Ctrl-C: the token it came before is not shown, and not part of the reply
	c.gopt.OnToken = func(id int) error {
		if c.interrupted() {
			stopped = true
			return engine.ErrStop
		}
		return p.token(id)
	}
	c.gopt.History = c.seen // the penalties and the suffix drafter see the earlier turns
	if t.newConstraint != nil {
		c.gopt.Constraint = t.newConstraint() // each reply starts the grammar anew
	}
	p.clock.start = time.Now()
	c.mark = nil
	rest := prompt
	if c.marks {
		// Feed the conversation up to the assistant's header, mark, then
		// the header and the reply.
		pre := prompt[:t.markAt(c.conv, rendered, t.tm.Tok.Decode(c.seen), prompt)]
		if len(pre) > 0 {
			if _, err := s.Generate(pre, 0, c.gopt); err != nil {
				return fmt.Errorf("turn %d: %w", turn, err)
			}
			c.gopt.History = append(slices.Clone(c.seen), pre...)
		}
		c.mark, rest = s.Mark(), prompt[len(pre):]
	}
	out, err := s.Generate(rest, t.n, c.gopt)
	p.finish()
	end := time.Now()
	full := errors.Is(err, engine.ErrContext) && len(out) > 0 // the reply ran to the end of the context
	if full {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("turn %d, after %d generated tokens (printed): %w", turn, len(out), err)
	}
	if p.err != nil {
		return p.err
	}
	if len(out) == 0 || len(p.shown) == 0 {
		fmt.Fprintln(stdout)
	}
	c.seen = append(c.seen, prompt...)
	if len(out) > 0 {
		c.seen = append(c.seen, out[:len(out)-1]...) // the last one is fed with the next turn
	}
	c.conv = append(c.conv, chat.Message{Role: "assistant", Content: p.reply()})
	if stopped {
		fmt.Fprintln(stderr, "strata: reply stopped (Ctrl-C); Ctrl-C again, /exit or Ctrl-D ends the chat")
	}
	if full {
		fmt.Fprintf(stderr, "strata: the reply filled the context of %d tokens; /reset starts over\n", t.context)
	}
	fmt.Fprintf(stderr, "strata: turn %d: prefilled %d new tokens after %d kept; %s; session at %d\n",
		turn, len(prompt), kept, p.timings(end, len(prompt)), s.Pos())
	return nil
}

// markAt is where in this turn's prompt to mark the session: where the
// template's generation prompt (the assistant's header, with Qwen3's empty
// think block under enable_thinking=false) begins, since a template that
// re-renders the reply differently changes it from there on; else before the
// prompt's last token.
func (t *textRun) markAt(conv []chat.Message, rendered, fed string, prompt []int) int {
	at := len(prompt) - 1
	opt := t.chatOptions()
	opt.AddGenerationPrompt = false
	base, err := t.tm.Render(conv, opt, *t.f.parseSpecial)
	if err != nil || !strings.HasPrefix(rendered, base) || !strings.HasPrefix(base, fed) {
		return at
	}
	pre := t.tm.EncodeRendered(base[len(fed):])
	if len(pre) < len(prompt) && slices.Equal(prompt[:len(pre)], pre) {
		return len(pre)
	}
	return at
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}
