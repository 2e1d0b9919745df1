// Package chat renders a model's own Jinja chat template (from
// tokenizer_config.json, chat_template.jinja or a GGUF's
// tokenizer.chat_template) the way transformers' apply_chat_template does:
// messages, tools, add_generation_prompt, enable_thinking and the special
// tokens as variables, raise_exception and tojson available, Jinja's
// trim_blocks/lstrip_blocks whitespace rules.
//
// The engine is github.com/ardanlabs/jinja, a pure-Go Jinja built for chat
// templates: ordered dicts (tojson keeps the key order of the tool schemas, as
// Python's dict does), Python json.dumps formatting, Python string methods and
// HF's whitespace defaults. It renders every reference conversation exactly.
package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Template is a compiled chat template plus the special-token variables it sees.
type Template struct {
	src     string
	tmpl    *jinja.Template
	special map[string]jinja.Value
}

// Compile parses a chat template. Tokens names the special tokens visible to
// the template (bos_token, eos_token, pad_token, unk_token); empty ones are left
// undefined, as transformers leaves unset tokens out.
func Compile(src string, tokens SpecialTokens) (*Template, error) {
	t, err := jinja.Compile(rewriteOutputs(src))
	if err != nil {
		return nil, locate(src, err)
	}
	sp := map[string]jinja.Value{tojsonFunc: tojsonCallable, printFunc: printCallable}
	for k, v := range map[string]string{"bos_token": tokens.BOS, "eos_token": tokens.EOS,
		"pad_token": tokens.PAD, "unk_token": tokens.UNK} {
		if v != "" {
			sp[k] = jinja.NewString(v)
		}
	}
	if len(tokens.Additional) > 0 {
		items := make([]jinja.Value, len(tokens.Additional))
		for i, s := range tokens.Additional {
			items[i] = jinja.NewString(s)
		}
		sp["additional_special_tokens"] = jinja.NewList(items)
	}
	return &Template{src: src, tmpl: t, special: sp}, nil
}

// SpecialTokens are the token strings a template may refer to.
type SpecialTokens struct {
	BOS, EOS, PAD, UNK string
	Additional         []string
}

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Options are apply_chat_template's other arguments.
type Options struct {
	// AddGenerationPrompt ends the text with the assistant's turn header.
	AddGenerationPrompt bool
	// EnableThinking is passed when non-nil (Qwen3 reads it; nil leaves it
	// undefined, which Qwen3 treats as true).
	EnableThinking *bool
	// Tools is a JSON array of tool definitions, or empty for none.
	Tools json.RawMessage
}

// Render renders a conversation of plain messages.
func (t *Template) Render(messages []Message, opt Options) (string, error) {
	if messages == nil {
		messages = []Message{}
	}
	raw, err := json.Marshal(messages)
	if err != nil {
		return "", err
	}
	return t.RenderJSON(raw, opt)
}

// RenderJSON renders a conversation given as a JSON array of message objects
// (role, content, reasoning_content, tool_calls, ... as the template expects).
func (t *Template) RenderJSON(messages json.RawMessage, opt Options) (string, error) {
	msgs, err := FromJSON(messages)
	if err != nil {
		return "", fmt.Errorf("messages: %w", err)
	}
	if !msgs.IsList() {
		return "", fmt.Errorf("messages: want a JSON array of message objects")
	}
	data := map[string]jinja.Value{
		"messages":              msgs,
		"add_generation_prompt": jinja.NewBool(opt.AddGenerationPrompt),
		"tools":                 jinja.None(),
	}
	if len(bytes.TrimSpace(opt.Tools)) > 0 {
		tools, err := FromJSON(opt.Tools)
		if err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
		data["tools"] = tools
	}
	if opt.EnableThinking != nil {
		data["enable_thinking"] = jinja.NewBool(*opt.EnableThinking)
	}
	for k, v := range t.special {
		data[k] = v
	}
	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		return "", locate(t.src, err)
	}
	return out, nil
}

// FromJSON converts JSON to template values keeping object key order.
func FromJSON(raw json.RawMessage) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return jinja.Undefined(), err
	}
	if d.More() {
		return jinja.Undefined(), fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (jinja.Value, error) {
	tok, err := d.Token()
	if err != nil {
		return jinja.Undefined(), err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '{' {
			v := jinja.NewDict()
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return v, err
				}
				val, err := decodeValue(d)
				if err != nil {
					return v, err
				}
				v.AsDict().Set(k.(string), val)
			}
			_, err := d.Token()
			return v, err
		}
		var items []jinja.Value
		for d.More() {
			val, err := decodeValue(d)
			if err != nil {
				return jinja.Undefined(), err
			}
			items = append(items, val)
		}
		_, err := d.Token()
		return jinja.NewList(items), err
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		if !strings.ContainsAny(t.String(), ".eE") {
			if i, err := t.Int64(); err == nil {
				return jinja.NewInt(i), nil
			}
		}
		f, err := t.Float64()
		return jinja.NewFloat(f), err
	case bool:
		return jinja.NewBool(t), nil
	}
	return jinja.None(), nil
}

var (
	hasLine    = regexp.MustCompile(`\bline \d+`)
	quotedName = regexp.MustCompile(`"([^"]+)"`)
	raiseCall  = regexp.MustCompile(`raise_exception\(\s*(?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")`)
	blockTag   = regexp.MustCompile(`\{%[-+]?\s*(\w+)`)
	unclosed   = regexp.MustCompile(`unclosed (\w+)`)
)

// locate names the template line of an error: the engine reports lines only
// for some parse errors, so the line is found from what the error names (the
// message of raise_exception, an unknown filter, an unclosed block).
func locate(src string, err error) error {
	msg := err.Error()
	if hasLine.MatchString(msg) {
		return fmt.Errorf("chat template: %w", err)
	}
	if line := findLine(src, msg); line > 0 {
		return fmt.Errorf("chat template line %d: %w", line, err)
	}
	return fmt.Errorf("chat template: %w", err)
}

func lineOf(src string, off int) int { return 1 + strings.Count(src[:off], "\n") }

func findLine(src, msg string) int {
	// raise_exception('...') whose message is the error.
	calls := raiseCall.FindAllStringSubmatchIndex(src, -1)
	for _, c := range calls {
		lit := ""
		if c[2] >= 0 {
			lit = src[c[2]:c[3]]
		} else {
			lit = src[c[4]:c[5]]
		}
		if s, err := strconv.Unquote(`"` + strings.ReplaceAll(lit, `"`, `\"`) + `"`); err == nil {
			lit = s
		}
		if lit != "" && strings.Contains(msg, lit) {
			return lineOf(src, c[0])
		}
	}
	// An unclosed block: the line of the opener left on the stack.
	if m := unclosed.FindStringSubmatch(msg); m != nil {
		var stack []int
		var names []string
		for _, tag := range blockTag.FindAllStringSubmatchIndex(src, -1) {
			name := src[tag[2]:tag[3]]
			switch {
			case name == "if" || name == "for" || name == "macro" || name == "block" || name == "call" || name == "filter" || name == "generation":
				stack, names = append(stack, tag[0]), append(names, name)
			case strings.HasPrefix(name, "end") && len(stack) > 0:
				stack, names = stack[:len(stack)-1], names[:len(names)-1]
			}
		}
		for i := len(names) - 1; i >= 0; i-- {
			if names[i] == m[1] {
				return lineOf(src, stack[i])
			}
		}
	}
	// Anything else that quotes a name (unknown filter "x"): its first use.
	if m := quotedName.FindStringSubmatch(msg); m != nil {
		if re, err := regexp.Compile(`\b` + regexp.QuoteMeta(m[1]) + `\b`); err == nil {
			if loc := re.FindStringIndex(src); loc != nil {
				return lineOf(src, loc[0])
			}
		}
	}
	if len(calls) == 1 { // the only raise_exception in the template
		return lineOf(src, calls[0][0])
	}
	return 0
}
