package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/engine"
)

// interruptingSession is a fakeSession that delivers a Ctrl-C after the
// after-th token of reply number at (1-based), as a user pressing it mid-reply.
type interruptingSession struct {
	*fakeSession
	sigs      chan os.Signal
	at, after int
	replies   int
}

func (s *interruptingSession) Generate(prompt []int, n int, opt engine.GenerateOptions) ([]int, error) {
	if n > 0 {
		s.replies++
	}
	onToken, tokens := opt.OnToken, 0
	opt.OnToken = func(id int) error {
		err := onToken(id)
		if tokens++; s.replies == s.at && tokens == s.after {
			s.sigs <- os.Interrupt
		}
		return err
	}
	return s.fakeSession.Generate(prompt, n, opt)
}

// chatInterrupted holds a chat on tiny-go's tokenizer with Ctrl-C coming
// from sigs and the turns from in.
func chatInterrupted(t *testing.T, s *script, sess func(*fakeSession) chatSession, sigs chan os.Signal, in io.Reader) (stdout, stderr string, err error) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	tf := addTextFlags(fs)
	if err := fs.Parse([]string{"--chat", "--tokenizer", tinyTokenizer}); err != nil {
		t.Fatal(err)
	}
	tr, err := tf.open("", "", "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	oldSig, oldIn := chatInterrupts, stdin
	chatInterrupts = func() (<-chan os.Signal, func()) { return sigs, func() {} }
	stdin = in
	defer func() { chatInterrupts, stdin = oldSig, oldIn }()
	newSession := func() chatSession { s.sessions++; return sess(&fakeSession{s: s}) }
	var o, e bytes.Buffer
	err = tr.chat("tiny-go", newSession, newSession(), engine.GenerateOptions{EOS: tr.tm.StopIDs()}, &o, &e)
	return o.String(), e.String(), err
}

// Ctrl-C during a reply stops that reply (the conversation keeps what was
// shown) and the chat goes on; Ctrl-C at the prompt ends the chat with
// exit status 130.
func TestChatCtrlCStopsTheReply(t *testing.T) {
	enc := func(s string) []int { return encodeWith(t, tinyTokenizer, s) }
	const imEnd = 2
	r1 := enc(" one two three four five")
	r2 := append(enc("Fine."), imEnd)
	s := &script{replies: [][]int{r1, r2}}
	sigs := make(chan os.Signal, 1)
	var last *interruptingSession
	sess := func(f *fakeSession) chatSession {
		last = &interruptingSession{fakeSession: f, sigs: sigs, at: 1, after: 2}
		return last
	}
	out, errOut, err := chatInterrupted(t, s, sess, sigs, strings.NewReader("Count.\nAnd?\n"))
	if err != nil {
		t.Fatalf("chat: %v\n%s", err, errOut)
	}
	first := encodeWith(t, tinyTokenizer, " one two")
	if len(first) != 2 || !slices.Equal(first, r1[:2]) {
		t.Fatalf("tokens of %q: %v, of the reply %v", " one two", first, r1)
	}
	if out != " one two\nFine.\n" {
		t.Errorf("stdout %q: want the first reply up to the Ctrl-C, then the second", out)
	}
	if !strings.Contains(errOut, "reply stopped (Ctrl-C)") || !strings.Contains(errOut, "turn 2:") {
		t.Errorf("stderr %s", errOut)
	}
	// The second turn's prompt carries the stopped reply as it was shown.
	if p := s.prompts[1]; !strings.Contains(decodeWith(t, p), "And?") || !slices.Equal(last.consumed[:len(s.prompts[0])+2], append(slices.Clone(s.prompts[0]), r1[:2]...)) {
		t.Errorf("turn 2 prompt %v; the session consumed %v", p, last.consumed)
	}

	// Ctrl-C at the prompt (stdin still open) ends the chat.
	pr, pw := io.Pipe()
	defer pw.Close()
	sigs <- os.Interrupt
	_, errOut, err = chatInterrupted(t, &script{}, func(f *fakeSession) chatSession { return f }, sigs, pr)
	var st exitStatus
	if !errors.As(err, &st) || st.code != 130 {
		t.Errorf("Ctrl-C at the prompt: %v (%s); want exit status 130", err, errOut)
	}

	// Twice quickly: the first stops the reply, the second ends the chat.
	pr, pw = io.Pipe()
	defer pw.Close()
	go io.WriteString(pw, "Count.\n")
	s = &script{replies: [][]int{r1}}
	sess = func(f *fakeSession) chatSession {
		return &twiceSession{interruptingSession{fakeSession: f, sigs: sigs, at: 1, after: 2}}
	}
	out, errOut, err = chatInterrupted(t, s, sess, sigs, pr)
	if !errors.As(err, &st) || st.code != 130 || out != " one two\n" {
		t.Errorf("Ctrl-C twice: %v, stdout %q (%s); want the reply stopped, then exit status 130", err, out, errOut)
	}
}

// twiceSession delivers a second Ctrl-C right after the first is taken.
type twiceSession struct{ interruptingSession }

func (s *twiceSession) Generate(prompt []int, n int, opt engine.GenerateOptions) ([]int, error) {
	onToken := opt.OnToken
	opt.OnToken = func(id int) error {
		err := onToken(id)
		if errors.Is(err, engine.ErrStop) && len(s.sigs) == 0 {
			s.sigs <- os.Interrupt
		}
		return err
	}
	return s.interruptingSession.Generate(prompt, n, opt)
}

func decodeWith(t *testing.T, ids []int) string {
	t.Helper()
	out, errOut, status := runStrata(t, "tokenize", "--tokenizer", tinyTokenizer, "--decode", "-p", joinInts(ids, ","))
	if status != 0 {
		t.Fatal(errOut)
	}
	return out
}

// A turn that does not fit the context is refused with a note and the chat
// goes on (/reset makes room again); a reply that runs into the end of the
// context is kept, with a note, instead of ending the chat with an error.
func TestChatTurnThatDoesNotFit(t *testing.T) {
	var out, errOut string
	var status int
	withStdin("Hi\nHi\n/reset\nHi\n", func() {
		// tiny-go, whose replies to "Hi" these lengths were worked out on
		out, errOut, status = runStrata(t, "run", "--hf", tinyGo, "--chat", "--context", "30", "-n", "64", "--ignore-eos")
	})
	if status != 0 {
		t.Fatalf("status %d, stderr %s", status, errOut)
	}
	for _, want := range []string{"the reply filled the context of 30 tokens", "this turn does not fit: the conversation would be", "conversation reset", "turn 2:"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	if strings.Count(errOut, "the reply filled the context") != 2 || strings.TrimSpace(out) == "" {
		t.Errorf("want both replies (before and after /reset) to run to the context; stdout %q, stderr:\n%s", out, errOut)
	}
}
