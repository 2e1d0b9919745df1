package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/text"
	"github.com/strata-llm/strata/runtime/text/chat"
	"github.com/strata-llm/strata/runtime/text/tokenizer"
)

// stdin is what --chat, -f - and strata tokenize read (a test replaces it).
var stdin io.Reader = os.Stdin

// textDefaultN is -n for text prompts and chat when -n is not given: a reply
// ends at the model's EOS long before, usually.
const textDefaultN = 256

// textFlags are strata run's text-mode flags: a prompt as text, a system
// message, an interactive chat, and where the tokenizer comes from.
type textFlags struct {
	fs                              *flag.FlagSet
	prompt, file, system, tokenizer *string
	chat, noThink, parseSpecial     *bool
}

func addTextFlags(fs *flag.FlagSet) *textFlags {
	f := &textFlags{fs: fs}
	f.prompt = fs.String("prompt", "", "prompt `text`, tokenized with the model's tokenizer; the reply is printed as text as it is made")
	fs.StringVar(f.prompt, "p", "", "short for --prompt `text`")
	f.file = fs.String("file", "", "read the prompt text from this `file` (- for stdin)")
	fs.StringVar(f.file, "f", "", "short for --file `file`")
	f.system = fs.String("system", "", "system message `text`: the prompt becomes a conversation rendered with the model's chat template")
	f.chat = fs.Bool("chat", false, "interactive chat on stdin, rendered with the model's chat template; each turn prefills only its new tokens (/reset, /exit, Ctrl-D)")
	f.noThink = fs.Bool("no-think", false, "render the chat template with enable_thinking=false (Qwen3: reply without a <think> block)")
	f.parseSpecial = fs.Bool("parse-special", false, "with --chat or --system: special-token text in the messages (<|im_end|>, …) is control tokens (default: plain text, so only the chat template's markup is special)")
	f.tokenizer = fs.String("tokenizer", "", "HF tokenizer.json `file` for text prompts (default: the --hf directory's, the GGUF's own, or the default model's)")
	return f
}

// given reports whether one of the named flags was given, empty or not.
func (f *textFlags) given(names ...string) bool {
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || slices.Contains(names, fl.Name) })
	return set
}

// hasPrompt and hasFile report -p and -f: given at all, since an empty
// -p "" is a prompt (refused as empty), not the default one.
func (f *textFlags) hasPrompt() bool { return f.given("p", "prompt") }
func (f *textFlags) hasFile() bool   { return f.given("f", "file") }

// active reports whether the run is in text mode.
func (f *textFlags) active() bool {
	return f.hasPrompt() || f.hasFile() || *f.chat || *f.system != ""
}

// textRun is a text-mode run: the model's text side and the prompt.
type textRun struct {
	f     *textFlags
	tm    *text.Model
	n     int
	stops []string // stop strings (matched on the text, across tokens)
	label string   // the model, backend and threads, for the timings
	ids   bool     // the prompt is --tokens: the tokenizer only serves --stop
	// newConstraint makes each reply's grammar state (--json, --json-schema,
	// --grammar).
	newConstraint func() sample.Constraint
	// prompt is -p/-f tokenized (nil with --chat), read before the model
	// loads so that a bad prompt is heard about first.
	prompt []int
	// context is the model's context in tokens, for the chat's check that
	// a turn fits (0: not checked).
	context int
}

// isText reports whether the run prompts with text (-p, -f, --chat).
func (t *textRun) isText() bool { return t != nil && !t.ids }

// textOf is the token-bytes function for the stop-string matcher; nil when
// the run is not in text mode.
func (t *textRun) textOf() func(id int) []byte {
	if t == nil {
		return nil
	}
	return t.tm.Tok.TokenBytes
}

// open checks the text flags and loads the tokenizer before the model:
// --tokenizer, else the --hf directory's tokenizer.json, else the GGUF's
// metadata, else the default model's. With a prompt of ids, the tokenizer is
// loaded only when --stop or --tokenizer asks for it (stop strings match
// text); nil when neither does.
func (f *textFlags) open(hf, ggufPath, tokens string, n int, stops []string) (*textRun, error) {
	if !f.active() {
		if *f.tokenizer == "" && len(stops) == 0 {
			return nil, nil
		}
		tm, err := loadText(*f.tokenizer, hf, ggufPath)
		if errors.Is(err, text.ErrNoTokenizer) {
			return nil, usagef("--stop matches the generated text, and %v; give --tokenizer tokenizer.json", err)
		}
		if err != nil {
			return nil, err
		}
		return &textRun{f: f, tm: tm, n: n, ids: true}, nil
	}
	switch {
	case tokens != "":
		return nil, usagef("--tokens and a text prompt (-p, -f, --chat) are two prompts; give one")
	case f.hasPrompt() && f.hasFile():
		return nil, usagef("-p and -f are two prompts; give one")
	case *f.chat && (f.hasPrompt() || f.hasFile()):
		return nil, usagef("--chat reads its turns from stdin; drop -p/-f (--system sets its system message)")
	case !*f.chat && !f.hasPrompt() && !f.hasFile():
		return nil, usagef("--system needs a prompt: -p TEXT, -f FILE or --chat")
	case f.hasFile() && *f.file == "":
		return nil, usagef("-f is empty: give a file name (- for stdin)")
	}
	tm, err := loadText(*f.tokenizer, hf, ggufPath)
	if errors.Is(err, text.ErrNoTokenizer) {
		return nil, fmt.Errorf("%w: a text prompt needs one; give --tokenizer tokenizer.json, or the prompt as ids with --tokens", err)
	}
	if err != nil {
		return nil, err
	}
	if (*f.chat || *f.system != "") && tm.Template == nil {
		return nil, fmt.Errorf("the model has no chat template (tokenizer_config.json chat_template, chat_template.jinja or the GGUF's tokenizer.chat_template), which --chat and --system need")
	}
	set := false
	f.fs.Visit(func(fl *flag.Flag) { set = set || fl.Name == "n" })
	if !set {
		n = textDefaultN
	}
	t := &textRun{f: f, tm: tm, n: n, stops: stops}
	if !*f.chat {
		if t.prompt, err = t.promptIDs(); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// loadText finds the model's tokenizer.
func loadText(tokPath, hf, ggufPath string) (*text.Model, error) {
	switch {
	case tokPath != "":
		m, err := text.FromTokenizerFile(tokPath)
		if err != nil {
			return nil, fmt.Errorf("--tokenizer: %w", err)
		}
		return m, nil
	case hf != "":
		return text.FromHF(hf)
	case ggufPath != "":
		f, err := gguf.Open(ggufPath)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return text.FromGGUF(f)
	}
	return defaultText()
}

// defaultText is the embedded default model's tokenizer, read where it lies
// in the binary.
func defaultText() (*text.Model, error) {
	return text.FromFS(load.DefaultModelFS(), "the default model")
}

// run generates from the text prompt, or holds the chat.
func (t *textRun) run(l *load.Loaded, s *engine.Session, gopt engine.GenerateOptions, loaded time.Duration, stdout, stderr io.Writer) error {
	if v, m := t.tm.Tok.Vocab(), l.Config.Architecture.VocabSize; v > m {
		return fmt.Errorf("the tokenizer has %d token ids but model %s only %d", v, l.Config.Name, m)
	}
	for _, id := range t.tm.StopIDs() {
		if !slices.Contains(gopt.EOS, id) {
			gopt.EOS = append(gopt.EOS, id)
		}
	}
	if *t.f.chat {
		t.context = l.Model.Context()
		return t.chat(l.Config.Name, func() chatSession { return engineSession{l.Model.NewSession()} }, engineSession{s}, gopt, stdout, stderr)
	}
	prompt := t.prompt
	p := newTextPrinter(t.tm, stdout, t.stops)
	gopt.OnToken = p.token
	p.clock.start = time.Now()
	out, err := s.Generate(prompt, t.n, gopt)
	p.finish()
	end := time.Now()
	if err != nil && len(out) > 0 {
		return fmt.Errorf("after %d generated tokens (printed): %w", len(out), err)
	}
	if err != nil {
		return err
	}
	if p.err != nil {
		return p.err
	}
	printTimings(stderr, t.label, loaded, &p.clock, len(prompt), end)
	return nil
}

// promptIDs reads -p/-f and tokenizes it: as is (with BOS when the model adds
// one), or with --system as a conversation through the chat template.
func (t *textRun) promptIDs() ([]int, error) {
	s, from := *t.f.prompt, "-p"
	if t.f.hasFile() {
		from = "-f " + *t.f.file
		var data []byte
		var err error
		if *t.f.file == "-" {
			data, err = io.ReadAll(stdin)
		} else {
			data, err = os.ReadFile(*t.f.file)
		}
		if err != nil {
			return nil, fmt.Errorf("-f: %w", err)
		}
		s = string(data)
	}
	if *t.f.system == "" {
		// As llama-cli: an empty prompt is the BOS alone where the model
		// starts prompts with one, else an error.
		if ids := t.tm.Encode(s); len(ids) > 0 {
			return ids, nil
		}
		return nil, usagef("the prompt (%s) is empty and the model adds no BOS token to start from: give the prompt text", from)
	}
	if s == "" {
		return nil, usagef("the prompt (%s) is empty: give the user's message", from)
	}
	r, err := t.tm.Render([]chat.Message{{Role: "system", Content: *t.f.system}, {Role: "user", Content: s}}, t.chatOptions(), *t.f.parseSpecial)
	if err != nil {
		return nil, err
	}
	return t.tm.EncodeRendered(r), nil
}

func (t *textRun) chatOptions() chat.Options {
	o := chat.Options{AddGenerationPrompt: true}
	if *t.f.noThink {
		no := false
		o.EnableThinking = &no
	}
	return o
}

// textPrinter streams generated tokens as text: control tokens and the EOS
// are not shown, stop strings are matched on the text across tokens, and a
// character split across tokens is printed whole.
type textPrinter struct {
	tm      *text.Model
	w       io.Writer
	stop    *sample.Stopper
	utf     *tokenizer.Stream
	ids     []int      // every token committed
	shown   []byte     // the text printed
	clock   phaseClock // the prompt's and the generation's times
	stopped bool
	err     error
}

func newTextPrinter(tm *text.Model, w io.Writer, stops []string) *textPrinter {
	return &textPrinter{tm: tm, w: w, stop: sample.NewStopper(stops), utf: tm.Tok.NewStream()}
}

func (p *textPrinter) token(id int) error {
	p.clock.token()
	p.ids = append(p.ids, id)
	if p.tm.IsStop(id) || p.tm.Tok.IsSpecial(id) {
		return nil
	}
	emit, stopped := p.stop.Push(p.tm.Tok.TokenBytes(id))
	p.write(p.utf.PushBytes(emit))
	if stopped {
		p.stopped = true
		return engine.ErrStop
	}
	return p.err
}

func (p *textPrinter) write(s string) {
	if s == "" || p.err != nil {
		return
	}
	p.shown = append(p.shown, s...)
	if _, err := io.WriteString(p.w, s); err != nil {
		p.err = fmt.Errorf("writing the output: %w", err)
	}
}

// finish prints what was held back and ends the line.
func (p *textPrinter) finish() {
	p.write(p.utf.PushBytes(p.stop.Flush()) + p.utf.Flush())
	if len(p.shown) > 0 && p.shown[len(p.shown)-1] != '\n' {
		p.write("\n")
	}
}

// reply is the assistant's turn as the conversation keeps it: the generated
// text without the EOS (after a stop string, the text before it).
func (p *textPrinter) reply() string {
	if p.stopped {
		return string(p.shown)
	}
	ids := p.ids
	if len(ids) > 0 && p.tm.IsStop(ids[len(ids)-1]) {
		ids = ids[:len(ids)-1]
	}
	return p.tm.Tok.Decode(ids)
}

// timings is a chat turn's one-line split: the prompt (up to the first
// token) and the generation (the tokens after it), each with its own rate.
func (p *textPrinter) timings(end time.Time, prompt int) string {
	start := p.clock.start
	if len(p.ids) == 0 {
		d := end.Sub(start)
		return fmt.Sprintf("prompt %d tokens in %v (%.1f tok/s); nothing generated", prompt, d.Round(time.Millisecond), float64(prompt)/d.Seconds())
	}
	pd, gd := p.clock.first.Sub(start), end.Sub(p.clock.first)
	return fmt.Sprintf("prompt %d tokens in %v (%.1f tok/s); generated %d tokens in %v (%.1f tok/s after the first)",
		prompt, pd.Round(time.Millisecond), float64(prompt)/pd.Seconds(),
		len(p.ids), gd.Round(time.Millisecond), float64(len(p.ids)-1)/max(gd.Seconds(), 1e-9))
}

// textMetadata is the HF checkpoint's tokenizer, special ids and chat
// template as GGUF keys for strata convert (llama.cpp loads a file only with
// them); none, with a note, when the checkpoint has no tokenizer.json.
func textMetadata(hf string, vocabRows int, stderr io.Writer) ([]gguf.KV, error) {
	tm, err := text.FromHF(hf)
	if errors.Is(err, text.ErrNoTokenizer) {
		fmt.Fprintf(stderr, "note: %s has no tokenizer.json: the GGUF carries no tokenizer (run it with --tokens, or --tokenizer FILE)\n", hf)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("--hf: the tokenizer: %w", err)
	}
	kv, err := tm.GGUFMetadata(vocabRows)
	if err != nil {
		return nil, fmt.Errorf("--hf: the tokenizer: %w", err)
	}
	return kv, nil
}
