package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
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
}

// chat holds an interactive conversation on stdin. The session keeps the
// model state between turns, so a turn prefills only what is new: the text
// the template renders after what the session has already consumed. When the
// template renders the earlier turns differently from what the model saw
// (Qwen3 drops earlier turns' thinking), the session starts over on the whole
// re-rendered conversation, so the state always equals a fresh prefill of it.
func (t *textRun) chat(name string, newSession func() chatSession, s chatSession, gopt engine.GenerateOptions, stdout, stderr io.Writer) error {
	var conv []chat.Message
	if *t.f.system != "" {
		conv = append(conv, chat.Message{Role: "system", Content: *t.f.system})
	}
	system := len(conv)
	var seen []int // the tokens the session has consumed
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
			conv, seen = conv[:system], nil
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
			if kept > 0 {
				fmt.Fprintln(stderr, "strata: the template renders the earlier turns differently from what the model saw; prefilling the whole conversation again")
				s = newSession()
			}
			kept, seen = 0, nil
			prompt = tok.Encode(rendered)
		}
		if s.Pos() != kept {
			return fmt.Errorf("turn %d: the session is at position %d but has %d tokens of the conversation", turn, s.Pos(), kept)
		}
		p := newTextPrinter(t.tm, stdout, t.stops)
		gopt.OnToken = p.token
		gopt.History = seen // the penalties and the suffix drafter see the earlier turns
		p.clock.start = time.Now()
		out, err := s.Generate(prompt, t.n, gopt)
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
