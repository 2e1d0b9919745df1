package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/strata-llm/strata/runtime/chat"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/sample"
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
	var conv []chat.Message
	if *t.f.system != "" {
		conv = append(conv, chat.Message{Role: "system", Content: *t.f.system})
	}
	system := len(conv)
	var seen []int       // the tokens the session has consumed
	var mark sessionMark // the session before the last reply
	// Marking needs the prompt's last token fed apart; with MTP drafting
	// that would leave the head's caches a gap, so it is done without.
	marks := gopt.Spec.Depth == 0 || !gopt.Spec.MTP
	// One sampler for the whole conversation: its draws go on across turns
	// (a fresh one per turn would replay the seed's first draws); /reset
	// starts it over with the conversation.
	newSampler := func() error {
		smp, err := sample.New(gopt.Sampling)
		if err != nil {
			return fmt.Errorf("sampling: %w", err)
		}
		gopt.Sampler = smp
		return nil
	}
	if err := newSampler(); err != nil {
		return err
	}
	tok := t.tm.Tok
	in := bufio.NewReader(stdin)
	fmt.Fprintf(stderr, "strata: chatting with %s (/reset starts over, /exit or Ctrl-D ends)\n", name)
	for turn := 1; ; {
		fmt.Fprint(stderr, "> ")
		line, err := in.ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("reading stdin: %w", err)
		}
		if line == "" && err != nil {
			fmt.Fprintln(stderr)
			return nil
		}
		line = strings.TrimRight(line, "\r\n")
		switch strings.TrimSpace(line) {
		case "":
			continue
		case "/exit", "/quit":
			return nil
		case "/reset":
			conv, seen, mark = conv[:system], nil, nil
			s = newSession()
			if err := newSampler(); err != nil {
				return err
			}
			fmt.Fprintln(stderr, "strata: conversation reset")
			continue
		}
		conv = append(conv, chat.Message{Role: "user", Content: line})
		rendered, err := t.tm.Template.Render(conv, t.chatOptions())
		if err != nil { // the template refuses this conversation: say why, drop the turn
			fmt.Fprintf(stderr, "strata: %v\n", err)
			conv = conv[:len(conv)-1]
			continue
		}
		var prompt []int
		kept := len(seen)
		if fed := tok.Decode(seen); kept > 0 && strings.HasPrefix(rendered, fed) {
			prompt = tok.Encode(rendered[len(fed):])
		} else {
			whole := tok.Encode(rendered)
			switch {
			case kept == 0:
				prompt = whole
			case mark != nil && mark.Pos() <= commonPrefix(whole, seen):
				if err := mark.Rewind(); err != nil {
					return err
				}
				kept = mark.Pos()
				fmt.Fprintf(stderr, "strata: the template renders the last reply differently from what the model saw; rewound to position %d, before it\n", kept)
				seen, prompt = seen[:kept], whole[kept:]
			default:
				fmt.Fprintln(stderr, "strata: the template renders the earlier turns differently from what the model saw; prefilling the whole conversation again")
				s = newSession()
				kept, seen, prompt = 0, nil, whole
			}
		}
		if s.Pos() != kept {
			return fmt.Errorf("turn %d: the session is at position %d but has %d tokens of the conversation", turn, s.Pos(), kept)
		}
		p := newTextPrinter(t.tm, stdout, t.stops)
		gopt.OnToken = p.token
		gopt.History = seen // the penalties and the suffix drafter see the earlier turns
		p.clock.start = time.Now()
		mark = nil
		rest := prompt
		if marks {
			// Feed the conversation up to the assistant's header, mark, then
			// the header and the reply.
			pre := prompt[:t.markAt(conv, rendered, tok.Decode(seen), prompt)]
			if len(pre) > 0 {
				if _, err := s.Generate(pre, 0, gopt); err != nil {
					return fmt.Errorf("turn %d: %w", turn, err)
				}
				gopt.History = append(slices.Clone(seen), pre...)
			}
			mark, rest = s.Mark(), prompt[len(pre):]
		}
		out, err := s.Generate(rest, t.n, gopt)
		p.finish()
		end := time.Now()
		if err != nil {
			return fmt.Errorf("turn %d, after %d generated tokens (printed): %w", turn, len(out), err)
		}
		if p.err != nil {
			return p.err
		}
		if len(out) == 0 || len(p.shown) == 0 {
			fmt.Fprintln(stdout)
		}
		seen = append(seen, prompt...)
		if len(out) > 0 {
			seen = append(seen, out[:len(out)-1]...) // the last one is fed with the next turn
		}
		conv = append(conv, chat.Message{Role: "assistant", Content: p.reply()})
		fmt.Fprintf(stderr, "strata: turn %d: prefilled %d new tokens after %d kept; %s; session at %d\n",
			turn, len(prompt), kept, p.timings(end, len(prompt)), s.Pos())
		turn++
	}
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
	base, err := t.tm.Template.Render(conv, opt)
	if err != nil || !strings.HasPrefix(rendered, base) || !strings.HasPrefix(base, fed) {
		return at
	}
	pre := t.tm.Tok.Encode(base[len(fed):])
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
