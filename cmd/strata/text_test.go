package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/strata-llm/strata/internal/bytemodel"
	"github.com/strata-llm/strata/internal/sharedrefs"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/planes"
)

const refsDir = "../../testdata/tokenizer-refs"

var (
	qwenTokenizer = sharedrefs.Qwen3Tokenizer()
	tinyTokenizer = "../../models/tiny-go/tokenizer.json"
)

// withStdin runs f with stdin reading s.
func withStdin(s string, f func()) {
	old := stdin
	stdin = strings.NewReader(s)
	defer func() { stdin = old }()
	f()
}

// TestTokenizeBatchReferences: strata tokenize --batch gives HF's ids and
// decoded text for every reference text, and transformers' rendering and ids
// for every reference conversation, with both tokenizers.
func TestTokenizeBatchReferences(t *testing.T) {
	type tcase struct {
		Tokenizer, Text, Decoded string
		IDs                      []int
	}
	data, err := os.ReadFile(filepath.Join(refsDir, "tokenizer_cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	inputs := map[string]*bytes.Buffer{"qwen3": {}, "tiny-go": {}}
	var want = map[string][]tcase{}
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var c tcase
		if err := json.Unmarshal(line, &c); err != nil {
			t.Fatal(err)
		}
		in, _ := json.Marshal(map[string]string{"text": c.Text})
		inputs[c.Tokenizer].Write(append(in, '\n'))
		want[c.Tokenizer] = append(want[c.Tokenizer], c)
	}
	chats, err := os.ReadFile(filepath.Join(refsDir, "chat_template_cases.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for name, path := range map[string]string{"qwen3": qwenTokenizer, "tiny-go": tinyTokenizer} {
		var out, errOut string
		var status int
		withStdin(inputs[name].String()+string(chats), func() {
			out, errOut, status = runStrata(t, "tokenize", "--tokenizer", path, "--batch")
		})
		if status != 0 {
			t.Fatalf("%s: status %d: %s", name, status, errOut)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		cases := want[name]
		if len(lines) != len(cases)+30 {
			t.Fatalf("%s: %d output lines for %d inputs", name, len(lines), len(cases)+30)
		}
		for i, c := range cases {
			var got struct {
				IDs     []int
				Decoded string
			}
			if err := json.Unmarshal([]byte(lines[i]), &got); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got.IDs, c.IDs) || got.Decoded != c.Decoded {
				t.Fatalf("%s %q: got %v %q, want %v %q", name, c.Text, got.IDs, got.Decoded, c.IDs, c.Decoded)
			}
		}
		for i, line := range bytes.Split(bytes.TrimSpace(chats), []byte("\n")) {
			var c struct {
				Rendered  string
				IDs       []int
				IDsTinyGo []int `json:"ids_tiny_go"`
			}
			var got struct {
				IDs               []int
				Rendered, Decoded string
			}
			if err := json.Unmarshal(line, &c); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(lines[len(cases)+i]), &got); err != nil {
				t.Fatal(err)
			}
			wantIDs := c.IDs
			if name == "tiny-go" {
				wantIDs = c.IDsTinyGo
			}
			if got.Rendered != c.Rendered || got.Decoded != c.Rendered || !slices.Equal(got.IDs, wantIDs) {
				t.Fatalf("%s conversation %d:\n got %q %v\nwant %q %v", name, i+1, got.Rendered, got.IDs, c.Rendered, wantIDs)
			}
		}
	}
}

// TestTokenizeTextAndDecode: -p prints comma-separated ids (HF's), --decode
// turns them back, and bad input is refused by name.
func TestTokenizeTextAndDecode(t *testing.T) {
	// tokenizer_cases.jsonl: tiny-go, "\t\tcase 0:\n".
	out, errOut, status := runStrata(t, "tokenize", "--tokenizer", tinyTokenizer, "-p", "\t\tcase 0:\n")
	if status != 0 || out != "206,437,229,24,407\n" {
		t.Fatalf("tokenize: %q %q %d", out, errOut, status)
	}
	out, _, status = runStrata(t, "tokenize", "--tokenizer", tinyTokenizer, "--decode", "-p", "206, 437,229 24,407")
	if status != 0 || out != "\t\tcase 0:\n\n" {
		t.Fatalf("decode: %q %d", out, status)
	}
	_, errOut, status = runStrata(t, "tokenize", "--tokenizer", tinyTokenizer, "--decode", "-p", "1,99999")
	if status != 2 || !strings.Contains(errOut, `item 2 is "99999"`) {
		t.Fatalf("bad id: %q %d", errOut, status)
	}
	_, errOut, status = runStrata(t, "tokenize", "-p", "x")
	if status != 2 || !strings.Contains(errOut, "one of --hf, --gguf and --tokenizer") {
		t.Fatalf("no tokenizer: %q %d", errOut, status)
	}
	withStdin("{\"text\": \"a\"}\nnot json\n", func() {
		out, errOut, status = runStrata(t, "tokenize", "--tokenizer", tinyTokenizer, "--batch")
	})
	if status != 1 || !strings.Contains(out, `{"error":"line 2: not a JSON object`) || !strings.HasPrefix(out, `{"ids":[`) {
		t.Fatalf("bad batch line: %q %q %d", out, errOut, status)
	}
}

// script is what a scripted session "generates", one reply per Generate.
type script struct {
	replies  [][]int
	prompts  [][]int // what each Generate was asked to prefill
	samplers []*sample.Sampler
	sessions int
	rewinds  int
}

// fakeSession follows engine.Session's contract: it consumes the prompt and
// every returned token but the last; the reply stops at an EOS id, at
// OnToken's ErrStop, or after n tokens.
type fakeSession struct {
	s        *script
	consumed []int
	pending  []int // fed by a Generate with n = 0, part of the next turn's prompt
}

func (f *fakeSession) Pos() int { return len(f.consumed) }

// Mark and Rewind follow engine.Session's: back to the position.
func (f *fakeSession) Mark() sessionMark { return &fakeMark{f, len(f.consumed)} }

type fakeMark struct {
	f   *fakeSession
	pos int
}

func (m *fakeMark) Pos() int { return m.pos }
func (m *fakeMark) Rewind() error {
	m.f.consumed = m.f.consumed[:m.pos]
	m.f.s.rewinds++
	return nil
}

func (f *fakeSession) Generate(prompt []int, n int, opt engine.GenerateOptions) ([]int, error) {
	if !slices.Equal(opt.History, f.consumed) {
		return nil, fmt.Errorf("History %v is not what the session consumed, %v", opt.History, f.consumed)
	}
	f.consumed = append(f.consumed, prompt...)
	if n == 0 { // prefill only
		f.pending = append(f.pending, prompt...)
		return nil, nil
	}
	f.s.prompts = append(f.s.prompts, append(f.pending, prompt...))
	f.pending = nil
	f.s.samplers = append(f.s.samplers, opt.Sampler)
	reply := f.s.replies[0]
	f.s.replies = f.s.replies[1:]
	var out []int
	for _, id := range reply[:min(n, len(reply))] {
		out = append(out, id)
		err := opt.OnToken(id)
		if errors.Is(err, engine.ErrStop) || slices.Contains(opt.EOS, id) {
			break
		}
		if err != nil {
			return out, err
		}
	}
	if len(out) > 0 {
		f.consumed = append(f.consumed, out[:len(out)-1]...)
	}
	return out, nil
}

// chatWith runs the chat loop on a scripted session with tiny-go's tokenizer
// and chat template (Qwen3's).
func chatWith(t *testing.T, s *script, input string, extra ...string) (stdout, stderr string, last *fakeSession) {
	t.Helper()
	return chatWithTokenizer(t, tinyTokenizer, s, input, extra...)
}

func chatWithTokenizer(t *testing.T, tokPath string, s *script, input string, extra ...string) (stdout, stderr string, last *fakeSession) {
	t.Helper()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	tf := addTextFlags(fs)
	if err := fs.Parse(append([]string{"--chat", "--tokenizer", tokPath}, extra...)); err != nil {
		t.Fatal(err)
	}
	tr, err := tf.open("", "", "", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	newSession := func() chatSession {
		s.sessions++
		last = &fakeSession{s: s}
		return last
	}
	var o, e bytes.Buffer
	gopt := engine.GenerateOptions{EOS: tr.tm.StopIDs()}
	withStdin(input, func() { err = tr.chat("tiny-go", newSession, newSession(), gopt, &o, &e) })
	if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), last
}

func encodeWith(t *testing.T, path, s string) []int {
	t.Helper()
	out, errOut, status := runStrata(t, "tokenize", "--tokenizer", path, "-p", s)
	if status != 0 {
		t.Fatal(errOut)
	}
	var ids []int
	for _, f := range strings.Split(strings.TrimSpace(out), ",") {
		if f == "" {
			continue
		}
		id, _ := strconv.Atoi(f)
		ids = append(ids, id)
	}
	return ids
}

// TestChatPrefillsOnlyNewTokens: over three turns the session is kept, and
// turns 2 and 3 prefill exactly the ChatML text after what the session
// consumed (the end of the previous reply's turn, the new user turn, the
// assistant header), so the state is a prefill of the whole conversation.
func TestChatPrefillsOnlyNewTokens(t *testing.T) {
	enc := func(s string) []int { return encodeWith(t, tinyTokenizer, s) }
	const imEnd = 2 // <|im_end|> in tiny-go's vocabulary
	r1, r2, r3 := enc("Rayleigh scattering."), enc("The light travels further."), enc("You are welcome")
	s := &script{replies: [][]int{append(slices.Clone(r1), imEnd), append(slices.Clone(r2), imEnd), r3}}
	out, errOut, sess := chatWith(t, s, "Why is the sky blue?\nAnd at sunset?\n\nThanks!\n")
	if s.sessions != 1 {
		t.Fatalf("%d sessions, want 1 kept through the chat: %s", s.sessions, errOut)
	}
	turn := func(u string) string { return "<|im_start|>user\n" + u + "<|im_end|>\n<|im_start|>assistant\n" }
	want := [][]int{
		enc(turn("Why is the sky blue?")),
		enc("<|im_end|>\n" + turn("And at sunset?")),
		enc("<|im_end|>\n" + turn("Thanks!")),
	}
	if len(s.prompts) != 3 {
		t.Fatalf("%d turns prefilled, want 3", len(s.prompts))
	}
	for i := range want {
		if !slices.Equal(s.prompts[i], want[i]) {
			t.Errorf("turn %d prefilled %v, want %v", i+1, s.prompts[i], want[i])
		}
	}
	if sm := s.samplers; sm[0] == nil || sm[1] != sm[0] || sm[2] != sm[0] {
		t.Errorf("samplers %p: want one sampler for the conversation", sm)
	}
	whole := enc(turn("Why is the sky blue?") + "Rayleigh scattering.<|im_end|>\n" + turn("And at sunset?") +
		"The light travels further.<|im_end|>\n" + turn("Thanks!"))
	if got := sess.consumed; !slices.Equal(got, append(whole, r3[:len(r3)-1]...)) {
		t.Errorf("the session consumed %v,\nwant the whole conversation %v and the reply", got, whole)
	}
	if out != "Rayleigh scattering.\nThe light travels further.\nYou are welcome\n" {
		t.Errorf("stdout %q", out)
	}
	// The stats say it too: turn k keeps what the session held after turn k-1.
	re := regexp.MustCompile(`turn (\d): prefilled (\d+) new tokens after (\d+) kept; .*; session at (\d+)`)
	stats := re.FindAllStringSubmatch(errOut, -1)
	if len(stats) != 3 {
		t.Fatalf("stats lines: %q", errOut)
	}
	at := 0
	for i, m := range stats {
		pre, kept, pos := atoi(m[2]), atoi(m[3]), atoi(m[4])
		if kept != at || pre != len(want[i]) {
			t.Errorf("turn %d: prefilled %d after %d kept, want %d after %d", i+1, pre, kept, len(want[i]), at)
		}
		at = pos
	}
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// TestChatRewindsWhenTheReplyRendersDifferently: Qwen3's template drops the
// previous reply's thinking, so the session no longer matches the
// conversation; it rewinds to its mark before that reply (where the previous
// prompt's assistant header begins) and prefills the reply as re-rendered and
// the new turn, ending as a prefill of the whole conversation; /reset starts
// over.
func TestChatRewindsWhenTheReplyRendersDifferently(t *testing.T) {
	enc := func(s string) []int { return encodeWith(t, tinyTokenizer, s) }
	s := &script{replies: [][]int{
		append(enc("<think>\nhmm\n</think>\n\nBlue."), 2), append(enc("Red."), 2), append(enc("Hi."), 2)}}
	out, errOut, _ := chatWith(t, s, "Sky?\nSunset?\n/reset\nHello\n/exit\nnever read\n")
	turn := func(u string) string { return "<|im_start|>user\n" + u + "<|im_end|>\n<|im_start|>assistant\n" }
	first := enc(turn("Sky?"))
	whole := enc(turn("Sky?") + "Blue.<|im_end|>\n" + turn("Sunset?"))
	// The mark is where the generation prompt (the assistant header) begins.
	markPos := len(enc("<|im_start|>user\nSky?<|im_end|>\n"))
	want := [][]int{first, whole[markPos:], enc(turn("Hello"))}
	for i := range want {
		if i >= len(s.prompts) || !slices.Equal(s.prompts[i], want[i]) {
			t.Fatalf("turn %d prefilled %v, want %v", i+1, s.prompts, want[i])
		}
	}
	if sm := s.samplers; sm[1] != sm[0] || sm[2] == sm[1] {
		t.Errorf("samplers %p: want one until /reset, then a fresh one", sm)
	}
	if s.sessions != 2 || s.rewinds != 1 || !strings.Contains(errOut, fmt.Sprintf("rewound to position %d", markPos)) ||
		!strings.Contains(errOut, "conversation reset") {
		t.Fatalf("%d sessions, %d rewinds; stderr %q", s.sessions, s.rewinds, errOut)
	}
	if !strings.HasPrefix(out, "<think>\nhmm\n</think>\n\nBlue.\nRed.\nHi.\n") {
		t.Fatalf("stdout %q", out)
	}
}

// TestChatStartsOverWhenHistoryChanges: a template that renders an earlier
// part of the conversation differently every turn (here a turn count at the
// top) leaves no usable mark, so the whole conversation is prefilled into a
// fresh session.
func TestChatStartsOverWhenHistoryChanges(t *testing.T) {
	dir := t.TempDir()
	data, err := planes.ReadOSFile(tinyTokenizer)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644)
	tmpl := "{{ messages|length }} messages\n{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
	cfg, _ := json.Marshal(map[string]string{"chat_template": tmpl, "eos_token": "<|im_end|>"})
	os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644)
	enc := func(s string) []int { return encodeWith(t, tinyTokenizer, s) }
	s := &script{replies: [][]int{append(enc("Blue."), 2), append(enc("Red."), 2)}}
	_, errOut, sess := chatWithTokenizer(t, filepath.Join(dir, "tokenizer.json"), s, "Sky?\nSunset?\n")
	whole := enc("3 messages\n<|im_start|>user\nSky?<|im_end|>\n<|im_start|>assistant\nBlue.<|im_end|>\n<|im_start|>user\nSunset?<|im_end|>\n<|im_start|>assistant\n")
	if len(s.prompts) != 2 || !slices.Equal(s.prompts[1], whole) || s.sessions != 2 || s.rewinds != 0 ||
		!strings.Contains(errOut, "prefilling the whole conversation again") {
		t.Fatalf("turn 2 prefilled %v (want %v); %d sessions, %d rewinds; %q", s.prompts, whole, s.sessions, s.rewinds, errOut)
	}
	if !slices.Equal(sess.consumed, append(slices.Clone(whole), enc("Red.")...)) {
		t.Fatalf("the fresh session consumed %v", sess.consumed)
	}
}

// byteLevelTokenizer writes the tiny-a oracle with a byte-level tokenizer and
// Qwen3's chat template into dir (see bytemodel.Write).
func byteLevelTokenizer(t *testing.T, dir string) {
	t.Helper()
	if err := bytemodel.Write(dir, "../.."); err != nil {
		t.Fatal(err)
	}
}

// TestRunTextOnTheEngine: on the real engine (the tiny-a oracle with a
// byte-level tokenizer), -p prints as text exactly the tokens --tokens
// generates for the same ids, and --chat keeps the session across three turns.
func TestRunTextOnTheEngine(t *testing.T) {
	dir := t.TempDir()
	byteLevelTokenizer(t, dir)
	const prompt = "Hello, strata!"
	ids := encodeWith(t, filepath.Join(dir, "tokenizer.json"), prompt)
	if len(ids) != len(prompt) {
		t.Fatalf("byte tokenizer gave %v", ids)
	}
	idsOut, errOut, status := runStrata(t, "run", "--hf", dir, "--tokens", joinInts(ids, ","), "-n", "12")
	if status != 0 {
		t.Fatal(errOut)
	}
	var gen []int
	for _, f := range strings.Fields(idsOut) {
		gen = append(gen, atoi(f))
	}
	textOut, errOut, status := runStrata(t, "run", "--hf", dir, "-p", prompt, "-n", "12")
	if status != 0 {
		t.Fatal(errOut)
	}
	// The text is the generated bytes (ids < 256), up to an EOS; the other
	// ids are control tokens or holes, not shown.
	var want []byte
	for _, id := range gen {
		if id == 258 || id == 256 {
			break
		}
		if id < 256 {
			want = append(want, byte(id))
		}
	}
	// Ill-formed bytes print as U+FFFD each: with no lead byte among them
	// (C2-F4) that is also the maximal-subpart rule the decoder follows.
	lead := slices.ContainsFunc(want, func(b byte) bool { return b >= 0xC2 && b <= 0xF4 })
	if lead && !utf8.Valid(want) {
		t.Fatalf("the generated bytes %q hold a truncated sequence; pick another prompt", want)
	}
	wantText := string([]rune(string(want)))
	t.Logf("generated %v: %q", gen, textOut)
	if strings.TrimSuffix(textOut, "\n") != wantText {
		t.Fatalf("text %q, want %q (ids %v)", textOut, wantText, gen)
	}
	if !regexp.MustCompile(fmt.Sprintf(`prompt eval time = .* / +%d tokens`, len(ids))).MatchString(errOut) || !strings.Contains(errOut, "eval time") {
		t.Fatalf("timings: %q", errOut)
	}

	// -f FILE and -f - read the same prompt.
	pf := filepath.Join(t.TempDir(), "prompt.txt")
	if err := os.WriteFile(pf, []byte(prompt), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, errOut, status := runStrata(t, "run", "--hf", dir, "-f", pf, "-n", "12"); status != 0 || got != textOut {
		t.Fatalf("-f: %q (status %d, %s), want %q", got, status, errOut, textOut)
	}
	withStdin(prompt, func() {
		var got string
		if got, errOut, status = runStrata(t, "run", "--hf", dir, "-f", "-", "-n", "12"); status != 0 || got != textOut {
			t.Fatalf("-f -: %q (status %d, %s), want %q", got, status, errOut, textOut)
		}
	})
	// --system: the prompt is the template's rendering of a system and a user
	// message (what tokenize --batch renders), fed without BOS.
	var batch string
	withStdin(`{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "`+prompt+`"}], "add_generation_prompt": true}`+"\n", func() {
		batch, errOut, status = runStrata(t, "tokenize", "--hf", dir, "--batch")
	})
	var rendered struct {
		IDs      []int
		Rendered string
	}
	if err := json.Unmarshal([]byte(batch), &rendered); err != nil || !strings.HasPrefix(rendered.Rendered, "<|im_start|>system\nBe brief.<|im_end|>\n") {
		t.Fatalf("tokenize --batch: %q %v", batch, err)
	}
	sysIDs, _, _ := runStrata(t, "run", "--hf", dir, "--tokens", joinInts(rendered.IDs, ","), "-n", "6")
	sysText, errOut, status := runStrata(t, "run", "--hf", dir, "--system", "Be brief.", "-p", prompt, "-n", "6")
	if status != 0 {
		t.Fatal(errOut)
	}
	var sysWant []byte
	for _, f := range strings.Fields(sysIDs) {
		if id := atoi(f); id == 256 || id == 258 {
			break
		} else if id < 256 {
			sysWant = append(sysWant, byte(id))
		}
	}
	if strings.TrimSuffix(sysText, "\n") != string([]rune(string(sysWant))) {
		t.Fatalf("--system: %q, want the text of %s", sysText, sysIDs)
	}

	// --stop cuts the text at a string that spans tokens (two byte tokens here).
	if len(want) < 4 {
		t.Fatalf("too little text generated (%q) to test --stop", want)
	}
	stop := want[len(want)/2 : len(want)/2+2]
	cut := string([]rune(string(want[:bytes.Index(want, stop)])))
	stopOut, errOut, status := runStrata(t, "run", "--hf", dir, "-p", prompt, "-n", "12", "--stop", string(stop))
	if status != 0 || strings.TrimSuffix(stopOut, "\n") != cut {
		t.Fatalf("--stop %q: %q (status %d, %s), want %q", stop, stopOut, status, errOut, cut)
	}

	// With a prompt of ids, --stop still matches text: the tokenizer of the
	// --hf directory is loaded for it, and the ids stop at the token that
	// completes the string.
	var acc []byte
	k := -1
	for i, id := range gen {
		if id < 256 {
			acc = append(acc, byte(id))
		}
		if bytes.Contains(acc, stop) {
			k = i
			break
		}
	}
	idsStop, errOut, status := runStrata(t, "run", "--hf", dir, "--tokens", joinInts(ids, ","), "-n", "12", "--stop", string(stop))
	if status != 0 || strings.TrimSpace(idsStop) != joinInts(gen[:k+1], " ") {
		t.Fatalf("--tokens --stop: %q (status %d, %s), want %q", idsStop, status, errOut, joinInts(gen[:k+1], " "))
	}

	var chatOut string
	withStdin("Hi\nHow are you?\nBye\n", func() {
		chatOut, errOut, status = runStrata(t, "run", "--hf", dir, "--chat", "-n", "6")
	})
	if status != 0 {
		t.Fatal(errOut)
	}
	re := regexp.MustCompile(`turn (\d): prefilled (\d+) new tokens after (\d+) kept; .*generated (\d+) tokens.*; session at (\d+)`)
	stats := re.FindAllStringSubmatch(errOut, -1)
	if len(stats) != 3 || strings.Contains(errOut, "prefilling the whole conversation again") {
		t.Fatalf("chat stderr %q stdout %q", errOut, chatOut)
	}
	at := 0
	for i, m := range stats {
		pre, kept, gen, pos := atoi(m[2]), atoi(m[3]), atoi(m[4]), atoi(m[5])
		if kept != at || pos != kept+pre+gen-1 {
			t.Errorf("turn %d: %d prefilled after %d kept, %d generated, session at %d (previous %d)", i+1, pre, kept, gen, pos, at)
		}
		if i > 0 && kept == 0 {
			t.Errorf("turn %d kept nothing", i+1)
		}
		at = pos
	}
}

// TestTextPromptNeedsATokenizer: a model without a tokenizer refuses a text
// prompt with an error that says what to give instead.
func TestTextPromptNeedsATokenizer(t *testing.T) {
	_, errOut, status := runStrata(t, "run", "--hf", tinyA, "-p", "hello")
	if status != 1 || !strings.Contains(errOut, "no tokenizer") || !strings.Contains(errOut, "--tokens") {
		t.Fatalf("status %d: %q", status, errOut)
	}
	_, errOut, status = runStrata(t, "run", "--hf", tinyA, "-p", "hello", "--tokens", "1,2")
	if status != 2 || !strings.Contains(errOut, "two prompts") {
		t.Fatalf("status %d: %q", status, errOut)
	}
	_, errOut, status = runStrata(t, "run", "--hf", tinyA, "--tokenizer", tinyTokenizer, "-p", "hello")
	if status != 1 || !strings.Contains(errOut, "8192 token ids but model") {
		t.Fatalf("status %d: %q", status, errOut)
	}
}

// TestConvertCarriesTheTokenizer: strata convert writes the checkpoint's
// tokenizer into the GGUF with llama.cpp's keys and types, and run --gguf -p
// then prints what run --hf -p prints; a checkpoint without a tokenizer
// converts with a note, and its GGUF still runs with --tokens.
func TestConvertCarriesTheTokenizer(t *testing.T) {
	dir := t.TempDir()
	byteLevelTokenizer(t, dir)
	out := filepath.Join(t.TempDir(), "m.gguf")
	if _, errOut, status := runStrata(t, "convert", "--hf", dir, "-o", out); status != 0 {
		t.Fatal(errOut)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	model, _ := f.String(gguf.KeyTokenizerModel)
	pre, _ := f.String(gguf.KeyTokenizerPre)
	toks, _ := f.Array(gguf.KeyTokens)
	types, _ := f.Array(gguf.KeyTokenType)
	merges, _ := f.Array(gguf.KeyMerges)
	eos, _ := f.Value(gguf.KeyEOSID)
	addBOS, _ := f.Value(gguf.KeyAddBOS)
	tmpl, _ := f.String(gguf.KeyChatTemplate)
	f.Close()
	if model != "gpt2" || pre != "qwen2" || toks.Elem != gguf.TypeString || toks.Len() != 512 ||
		types.Elem != gguf.TypeInt32 || types.Len() != 512 || merges.Elem != gguf.TypeString ||
		eos != uint32(258) || addBOS != false || !strings.Contains(tmpl, "<|im_start|>") {
		t.Fatalf("tokenizer metadata: model %q pre %q tokens %v×%d types %v×%d merges %v eos %#v add_bos %#v template %d bytes",
			model, pre, toks.Elem, toks.Len(), types.Elem, types.Len(), merges.Elem, eos, addBOS, len(tmpl))
	}
	want, errOut, status := runStrata(t, "run", "--hf", dir, "-p", "Hello, strata!", "-n", "12")
	if status != 0 {
		t.Fatal(errOut)
	}
	got, errOut, status := runStrata(t, "run", "--gguf", out, "-p", "Hello, strata!", "-n", "12")
	if status != 0 || got != want {
		t.Fatalf("run --gguf -p: %q (status %d, %s), want %q", got, status, errOut, want)
	}

	bare := filepath.Join(t.TempDir(), "bare.gguf")
	_, errOut, status = runStrata(t, "convert", "--hf", tinyA, "-o", bare)
	if status != 0 || !strings.Contains(errOut, "no tokenizer.json") {
		t.Fatalf("convert without a tokenizer: status %d, %q", status, errOut)
	}
	if _, errOut, status = runStrata(t, "run", "--gguf", bare, "--tokens", "1,2", "-n", "2"); status != 0 {
		t.Fatalf("run --gguf --tokens: %s", errOut)
	}
	if _, errOut, status = runStrata(t, "run", "--gguf", bare, "-p", "hi"); status != 1 || !strings.Contains(errOut, "no tokenizer") {
		t.Fatalf("run --gguf -p without a tokenizer: status %d, %q", status, errOut)
	}
}

// TestChatRewindOnTheEngine: with --no-think, Qwen3's template renders the
// previous reply without the empty <think></think> block the model saw, so
// turn 2 rewinds the real engine to its mark; the reply it then generates is
// the one a fresh run generates from the whole conversation as rendered
// (tokenize --batch renders it), so the rewound state is a fresh prefill's.
func TestChatRewindOnTheEngine(t *testing.T) {
	dir := t.TempDir()
	byteLevelTokenizer(t, dir)
	render := func(msgs []map[string]string) []int {
		m, _ := json.Marshal(map[string]any{"messages": msgs, "add_generation_prompt": true, "enable_thinking": false})
		var out string
		withStdin(string(m)+"\n", func() { out, _, _ = runStrata(t, "tokenize", "--hf", dir, "--batch") })
		var r struct{ IDs []int }
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("tokenize --batch: %q: %v", out, err)
		}
		return r.IDs
	}
	// What a fresh run generates from ids, as the reply text (ids < 256 are
	// bytes; 256 and 258 end the turn; others print nothing).
	generate := func(ids []int) (reply string, text string) {
		out, errOut, status := runStrata(t, "run", "--hf", dir, "--tokens", joinInts(ids, ","), "-n", "6")
		if status != 0 {
			t.Fatal(errOut)
		}
		var gen []int
		for _, f := range strings.Fields(out) {
			if id := atoi(f); id == 256 || id == 258 {
				break
			} else {
				gen = append(gen, id)
			}
		}
		dec, _, _ := runStrata(t, "tokenize", "--hf", dir, "--decode", "-p", joinInts(gen, ","))
		reply = strings.TrimSuffix(dec, "\n")
		var b []byte
		for _, id := range gen {
			if id < 256 {
				b = append(b, byte(id))
			}
		}
		return reply, string([]rune(string(b)))
	}
	u1, u2 := map[string]string{"role": "user", "content": "Hi"}, map[string]string{"role": "user", "content": "More"}
	reply1, text1 := generate(render([]map[string]string{u1}))
	_, text2 := generate(render([]map[string]string{u1, {"role": "assistant", "content": reply1}, u2}))

	var out, errOut string
	var status int
	withStdin("Hi\nMore\n", func() { out, errOut, status = runStrata(t, "run", "--hf", dir, "--chat", "--no-think", "-n", "6") })
	if status != 0 || !strings.Contains(errOut, "rewound to position") {
		t.Fatalf("status %d, stderr %q", status, errOut)
	}
	lines := func(s string) string {
		if s == "" || !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		return s
	}
	if want := lines(text1) + lines(text2); out != want {
		t.Fatalf("chat printed %q, want %q (fresh runs)", out, want)
	}
}
