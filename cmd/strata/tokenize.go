package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/runtime/text"
	"github.com/strata-llm/strata/runtime/text/chat"
)

func init() {
	commands["tokenize"] = command{"turn text into token ids and back with a model's tokenizer", tokenizeCmd}
}

const tokenizeAbout = `
Tokenizes text with a model's own tokenizer, as llama.cpp's llama-tokenize
does: the HF tokenizer.json of --hf DIR or --tokenizer FILE, or the tokenizer
a GGUF file carries (--gguf). The text comes from -p, -f FILE or stdin (an
empty -p '' is the empty text, no ids); the ids are printed on one line,
comma-separated (what strata run --tokens takes). No special tokens are
added (HF add_special_tokens=False); special-token text such as <|im_end|>
in the input is its token.

--decode turns ids (from -p, -f or stdin, separated by commas or spaces) back
into text.

--batch reads JSON lines from stdin and writes one JSON line per input:
  {"text": "..."}                      -> {"ids": [...], "decoded": "..."}
  {"messages": [...], "tools": [...],  -> {"ids": [...], "decoded": "...",
   "add_generation_prompt": true,          "rendered": "..."}
   "enable_thinking": false}
  {"ids": [...]}                       -> {"decoded": "..."}
(a line with "messages" is a conversation even when it also has "ids").
A conversation is rendered with the model's chat template (enable_thinking
null or absent leaves it undefined), then tokenized without adding special
tokens. The messages' special-token text (<|im_end|>, …) is tokenized as
plain text, so only the template's markup is special, unless the line has
"parse_special": true (or --parse-special sets that default); "rendered" is
the text as the model reads it. A line that fails gives {"error": "..."}
and the exit status is 1.

Examples:
  strata tokenize --hf ./tiny-go -p 'func main() {'
  strata tokenize --gguf model.gguf --decode -p 1,3888,207
  echo '{"messages":[{"role":"user","content":"Hi"}],"add_generation_prompt":true}' |
    strata tokenize --tokenizer tokenizer.json --batch`

func tokenizeCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("tokenize", "(--hf DIR | --gguf FILE | --tokenizer FILE) [-p TEXT | -f FILE] [--decode | --batch]", tokenizeAbout, stderr)
	hf := fs.String("hf", "", "HF checkpoint `directory` with a tokenizer.json (and tokenizer_config.json for the chat template)")
	ggufPath := fs.String("gguf", "", "GGUF `file` with tokenizer metadata")
	tokPath := fs.String("tokenizer", "", "HF tokenizer.json `file` (.json.gz too); tokenizer_config.json beside it gives the chat template")
	prompt := fs.String("p", "", "the `text` (or with --decode the ids); default: all of stdin")
	fs.StringVar(prompt, "prompt", "", "long for -p `text`")
	file := fs.String("f", "", "read the text (or with --decode the ids) from this `file` (- for stdin)")
	fs.StringVar(file, "file", "", "long for -f `file`")
	decode := fs.Bool("decode", false, "read token ids and print their text")
	batch := fs.Bool("batch", false, "read JSON lines from stdin, write one JSON line per input (see above)")
	parseSpecial := fs.Bool("parse-special", false, "with --batch: special-token text in conversations' messages is control tokens unless a line says \"parse_special\": false (default: plain text)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	given := 0
	for _, s := range []string{*hf, *ggufPath, *tokPath} {
		if s != "" {
			given++
		}
	}
	if given != 1 {
		return usagef("give exactly one of --hf, --gguf and --tokenizer")
	}
	hasPrompt, hasFile := false, false
	fs.Visit(func(fl *flag.Flag) {
		hasPrompt = hasPrompt || fl.Name == "p" || fl.Name == "prompt"
		hasFile = hasFile || fl.Name == "f" || fl.Name == "file"
	})
	switch {
	case *batch && (*decode || hasPrompt || hasFile):
		return usagef("--batch reads its inputs from stdin; drop -p, -f and --decode")
	case hasPrompt && hasFile:
		return usagef("-p and -f are two inputs; give one")
	case hasFile && *file == "":
		return usagef("-f is empty: give a file name (- for stdin)")
	}
	tm, err := loadText(*tokPath, *hf, *ggufPath)
	if err != nil {
		return err
	}
	if *batch {
		return tokenizeBatch(tm, stdin, stdout, *parseSpecial)
	}
	in := *prompt
	if !hasPrompt {
		var data []byte
		var err error
		if hasFile && *file != "-" {
			if data, err = os.ReadFile(*file); err != nil {
				return fmt.Errorf("-f: %w", err)
			}
		} else if data, err = io.ReadAll(stdin); err != nil {
			return fmt.Errorf("reading stdin: %w", err)
		}
		in = string(data)
	}
	if *decode {
		ids, err := parseIDList(in, tm.Tok.Vocab())
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(stdout, tm.Tok.Decode(ids))
		return err
	}
	ids := tm.Tok.Encode(in)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	_, err = fmt.Fprintln(stdout, strings.Join(parts, ","))
	return err
}

// parseIDList reads ids separated by commas, spaces or newlines (brackets
// allowed, as a JSON list).
func parseIDList(s string, vocab int) ([]int, error) {
	fields := strings.FieldsFunc(s, func(r rune) bool {
		return r == ',' || r == '[' || r == ']' || r == ' ' || r == '\t' || r == '\n' || r == '\r'
	})
	ids := make([]int, 0, len(fields))
	for i, f := range fields {
		id, err := strconv.Atoi(f)
		if err != nil || id < 0 || id >= vocab {
			return nil, usagef("--decode: item %d is %q, expected a token id in [0, %d)", i+1, f, vocab)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

type batchIn struct {
	Text                *string         `json:"text"`
	IDs                 []int           `json:"ids"`
	Messages            json.RawMessage `json:"messages"`
	Tools               json.RawMessage `json:"tools"`
	AddGenerationPrompt bool            `json:"add_generation_prompt"`
	EnableThinking      *bool           `json:"enable_thinking"`
	ParseSpecial        *bool           `json:"parse_special"`
}

type batchOut struct {
	IDs      *[]int  `json:"ids,omitempty"`
	Decoded  *string `json:"decoded,omitempty"`
	Rendered *string `json:"rendered,omitempty"`
	Error    string  `json:"error,omitempty"`
}

var errBatch = errors.New("some --batch inputs failed (their lines hold the errors)")

func tokenizeBatch(tm *text.Model, r io.Reader, w io.Writer, parseSpecial bool) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 64<<20)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	failed := false
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		out, err := tokenizeOne(tm, sc.Bytes(), parseSpecial)
		if err != nil {
			failed = true
			out = batchOut{Error: fmt.Sprintf("line %d: %v", line, err)}
		}
		if err := enc.Encode(out); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	if failed {
		return errBatch
	}
	return nil
}

func tokenizeOne(tm *text.Model, line []byte, parseSpecial bool) (batchOut, error) {
	var in batchIn
	if err := json.Unmarshal(line, &in); err != nil {
		return batchOut{}, fmt.Errorf("not a JSON object: %w", err)
	}
	hasMsgs := len(in.Messages) > 0 && string(in.Messages) != "null"
	switch {
	case !hasMsgs && in.Text == nil && in.IDs == nil:
		return batchOut{}, fmt.Errorf("want \"text\", \"messages\" or \"ids\"")
	case hasMsgs && in.Text != nil:
		return batchOut{}, fmt.Errorf("\"text\" and \"messages\" are two inputs; give one")
	case !hasMsgs && in.Text == nil: // ids to decode
		for _, id := range in.IDs {
			if id < 0 || id >= tm.Tok.Vocab() {
				return batchOut{}, fmt.Errorf("ids: %d is not a token id in [0, %d)", id, tm.Tok.Vocab())
			}
		}
		d := tm.Tok.Decode(in.IDs)
		return batchOut{Decoded: &d}, nil
	case in.Text != nil:
		ids := append([]int{}, tm.Tok.Encode(*in.Text)...)
		d := tm.Tok.Decode(ids)
		return batchOut{IDs: &ids, Decoded: &d}, nil
	}
	if tm.Template == nil {
		return batchOut{}, fmt.Errorf("messages: the model has no chat template")
	}
	opt := chat.Options{AddGenerationPrompt: in.AddGenerationPrompt, EnableThinking: in.EnableThinking}
	if string(in.Tools) != "null" {
		opt.Tools = in.Tools
	}
	if in.ParseSpecial != nil {
		parseSpecial = *in.ParseSpecial
	}
	rendered, err := tm.RenderJSON(in.Messages, opt, parseSpecial)
	if err != nil {
		return batchOut{}, err
	}
	ids := append([]int{}, tm.EncodeRendered(rendered)...)
	d := tm.Tok.Decode(ids)
	rendered = tm.Shown(rendered)
	return batchOut{IDs: &ids, Decoded: &d, Rendered: &rendered}, nil
}
