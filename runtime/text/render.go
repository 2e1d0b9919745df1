package text

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/strata-llm/strata/runtime/text/chat"
)

// Render renders a conversation with the chat template for EncodeRendered.
// Unless parseSpecial, the messages' special-token text is escaped first
// (tokenizer.EscapeSpecial), so that only the template's own markup becomes
// control tokens: a user who writes <|im_end|><|im_start|>system … gets
// that text, not a system turn.
func (m *Model) Render(msgs []chat.Message, opt chat.Options, parseSpecial bool) (string, error) {
	if m.Template == nil {
		return "", fmt.Errorf("the model has no chat template")
	}
	if !parseSpecial {
		esc := make([]chat.Message, len(msgs))
		for i, msg := range msgs {
			esc[i] = chat.Message{Role: m.Tok.EscapeSpecial(msg.Role), Content: m.Tok.EscapeSpecial(msg.Content)}
		}
		msgs = esc
		var err error
		if opt.Tools, err = m.escapeJSON(opt.Tools); err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
	}
	return m.Template.Render(msgs, opt)
}

// RenderJSON is Render for messages given as JSON (role, content,
// reasoning_content, tool_calls, …): unless parseSpecial, every string in
// them and in the tools is escaped.
func (m *Model) RenderJSON(msgs json.RawMessage, opt chat.Options, parseSpecial bool) (string, error) {
	if m.Template == nil {
		return "", fmt.Errorf("the model has no chat template")
	}
	if !parseSpecial {
		var err error
		if msgs, err = m.escapeJSON(msgs); err != nil {
			return "", fmt.Errorf("messages: %w", err)
		}
		if opt.Tools, err = m.escapeJSON(opt.Tools); err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
	}
	return m.Template.RenderJSON(msgs, opt)
}

// EncodeRendered tokenizes what Render made: the template's special tokens
// are the tokens, the escaped text in the messages plain text.
func (m *Model) EncodeRendered(s string) []int { return m.Tok.EncodeEscaped(s) }

// Shown is what Render made as the model reads it (the escapes undone).
func (m *Model) Shown(rendered string) string { return m.Tok.UnescapeSpecial(rendered) }

// escapeJSON escapes every string literal of the JSON text raw (keys too),
// leaving the rest byte for byte, so the order of the keys is kept.
func (m *Model) escapeJSON(raw json.RawMessage) (json.RawMessage, error) {
	var out []byte
	start := 0
	for i := 0; i < len(raw); i++ {
		if raw[i] != '"' {
			continue
		}
		j := i + 1
		for ; j < len(raw) && raw[j] != '"'; j++ {
			if raw[j] == '\\' {
				j++
			}
		}
		if j >= len(raw) {
			return nil, fmt.Errorf("an unterminated string at byte %d", i)
		}
		lit := raw[i : j+1]
		var s string
		if err := json.Unmarshal(lit, &s); err != nil {
			return nil, fmt.Errorf("the string at byte %d: %w", i, err)
		}
		if esc := m.Tok.EscapeSpecial(s); esc != s {
			var b bytes.Buffer
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(esc); err != nil {
				return nil, err
			}
			out = append(append(out, raw[start:i]...), bytes.TrimSuffix(b.Bytes(), []byte("\n"))...)
			start = j + 1
		}
		i = j
	}
	if out == nil {
		return raw, nil
	}
	return append(out, raw[start:]...), nil
}
