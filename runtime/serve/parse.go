package serve

import (
	"bytes"
	"encoding/json"
	"strings"
)

// part is a piece of a reply as the API shows it.
type part struct {
	kind partKind
	text string    // content or reasoning text
	call *toolCall // a whole tool call
}

type partKind int

const (
	partContent partKind = iota
	partReasoning
	partToolCall
)

// Qwen's tags: the thinking block and a tool call's JSON.
const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
	toolOpen   = "<tool_call>"
	toolClose  = "</tool_call>"
)

// replyParser splits a reply's text, as it streams, into content, reasoning
// (<think>…</think>) and tool calls (<tool_call>{"name":…,"arguments":…}
// </tool_call>). It holds back only a tail that could begin a tag, and the
// whitespace around the blocks (Qwen puts newlines there), so text streams as
// it comes. A tool call whose JSON is not {"name": string, "arguments": …}
// stays in the content as the model wrote it.
type replyParser struct {
	tools   bool // parse tool calls (the request offered tools)
	state   partKind
	buf     string // text not yet classified
	lead    bool   // drop whitespace at the start of the current block
	pending string // whitespace held at the end of the current block
	calls   int
	newID   func() string
}

// newReplyParser starts in reasoning when the prompt opened the thinking
// block itself (a template that ends the generation prompt with <think>).
func newReplyParser(tools, inThink bool, newID func() string) *replyParser {
	// The reply's own text is kept as written; only the whitespace around
	// the blocks is Qwen's formatting.
	p := &replyParser{tools: tools, newID: newID}
	if inThink {
		p.state, p.lead = partReasoning, true
	}
	return p
}

// push feeds text and returns the parts that are complete.
func (p *replyParser) push(s string) []part {
	p.buf += s
	var out []part
	for {
		switch p.state {
		case partToolCall:
			i := strings.Index(p.buf, toolClose)
			if i < 0 {
				return out
			}
			body := p.buf[:i]
			p.buf = p.buf[i+len(toolClose):]
			p.state, p.lead = partContent, true
			if c := p.toolCall(body); c != nil {
				out = append(out, part{kind: partToolCall, call: c})
			} else {
				out = p.text(out, toolOpen+body+toolClose, false)
			}
			continue
		}
		tags := []string{thinkOpen}
		if p.state == partReasoning {
			tags = []string{thinkClose}
		} else if p.tools {
			tags = append(tags, toolOpen)
		}
		at, tag := -1, ""
		for _, t := range tags {
			if i := strings.Index(p.buf, t); i >= 0 && (at < 0 || i < at) {
				at, tag = i, t
			}
		}
		if at < 0 {
			keep := 0
			for _, t := range tags {
				for n := min(len(t)-1, len(p.buf)); n > keep; n-- {
					if strings.HasSuffix(p.buf, t[:n]) {
						keep = n
						break
					}
				}
			}
			out = p.text(out, p.buf[:len(p.buf)-keep], false)
			p.buf = p.buf[len(p.buf)-keep:]
			return out
		}
		out = p.text(out, p.buf[:at], true)
		p.buf = p.buf[at+len(tag):]
		p.pending, p.lead = "", true
		switch tag {
		case thinkOpen:
			p.state = partReasoning
		case thinkClose:
			p.state = partContent
		case toolOpen:
			p.state = partToolCall
		}
	}
}

// text adds s to the current block, trimming the block's leading whitespace
// and holding its trailing whitespace until more text comes (dropped when the
// block ends at a tag: end).
func (p *replyParser) text(out []part, s string, end bool) []part {
	if p.lead {
		s = strings.TrimLeft(s, " \t\r\n")
		if s == "" {
			return out
		}
		p.lead = false
	}
	s = p.pending + s
	p.pending = ""
	t := strings.TrimRight(s, " \t\r\n")
	if !end {
		p.pending = s[len(t):]
	}
	s = t
	if s == "" {
		return out
	}
	return append(out, part{kind: p.state, text: s})
}

// flush ends the reply: what was held back is content (or reasoning in an
// unclosed thinking block; an unclosed tool call is content as written).
func (p *replyParser) flush() []part {
	rest := p.buf
	p.buf = ""
	if p.state == partToolCall {
		rest, p.state = toolOpen+rest, partContent
	}
	rest = p.pending + rest
	p.pending = ""
	if p.state != partContent {
		rest = strings.TrimRight(rest, " \t\r\n")
	}
	if p.lead {
		rest = strings.TrimLeft(rest, " \t\r\n")
	}
	if rest == "" {
		return nil
	}
	return []part{{kind: p.state, text: rest}}
}

// toolCall reads a tool call's JSON; nil when it is not one.
func (p *replyParser) toolCall(body string) *toolCall {
	var v struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	d := json.NewDecoder(strings.NewReader(body))
	if d.Decode(&v) != nil || d.More() || v.Name == "" {
		return nil
	}
	args := bytes.TrimSpace(v.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	var s string
	if json.Unmarshal(args, &s) == nil {
		args = []byte(s) // arguments already given as a JSON string
	} else {
		var buf bytes.Buffer
		if json.Compact(&buf, args) == nil {
			args = buf.Bytes()
		}
	}
	c := &toolCall{ID: p.newID(), Type: "function"}
	idx := p.calls
	c.Index = &idx
	p.calls++
	c.Function.Name, c.Function.Arguments = v.Name, string(args)
	return c
}

// parseReply splits a whole reply (non-streaming).
func parseReply(s string, tools, inThink bool, newID func() string) (content, reasoning string, calls []toolCall) {
	p := newReplyParser(tools, inThink, newID)
	var cb, rb strings.Builder
	for _, pt := range append(p.push(s), p.flush()...) {
		switch pt.kind {
		case partContent:
			cb.WriteString(pt.text)
		case partReasoning:
			rb.WriteString(pt.text)
		case partToolCall:
			c := *pt.call
			c.Index = nil
			calls = append(calls, c)
		}
	}
	return cb.String(), rb.String(), calls
}
