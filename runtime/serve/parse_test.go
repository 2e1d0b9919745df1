package serve

import (
	"fmt"
	"strings"
	"testing"
)

// collect runs the streaming parser over s cut at the given points and
// joins what it emits.
func collect(s string, cuts []int, tools, inThink bool) (content, reasoning string, calls []string) {
	n := 0
	p := newReplyParser(tools, inThink, func() string { n++; return fmt.Sprint("call_", n) })
	var parts []part
	prev := 0
	for _, c := range append(cuts, len(s)) {
		parts = append(parts, p.push(s[prev:c])...)
		prev = c
	}
	parts = append(parts, p.flush()...)
	var cb, rb strings.Builder
	for _, pt := range parts {
		switch pt.kind {
		case partContent:
			cb.WriteString(pt.text)
		case partReasoning:
			rb.WriteString(pt.text)
		case partToolCall:
			calls = append(calls, pt.call.ID+" "+pt.call.Function.Name+" "+pt.call.Function.Arguments)
		}
	}
	return cb.String(), rb.String(), calls
}

// TestReplyParser: hand-written Qwen replies split into content, reasoning
// and tool calls, whole and cut at every byte (one cut and two cuts).
func TestReplyParser(t *testing.T) {
	for _, c := range []struct {
		name, in           string
		tools, inThink     bool
		content, reasoning string
		calls              []string
	}{
		{name: "plain", in: "  Hello,\nworld  ", content: "  Hello,\nworld  "},
		{name: "think", in: "<think>\nI should greet.\n</think>\n\nHello!", content: "Hello!", reasoning: "I should greet."},
		{name: "empty think (no-think template)", in: "<think>\n\n</think>\n\nHi", content: "Hi"},
		{name: "think opened by the prompt", in: "pondering\n</think>\n\nDone.", inThink: true, content: "Done.", reasoning: "pondering"},
		{name: "unclosed think", in: "<think>\nstill thinking ", reasoning: "still thinking"},
		{name: "tool call", tools: true,
			in:    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			calls: []string{`call_1 get_weather {"city":"Paris"}`}},
		{name: "content, two calls", tools: true,
			in:      "Checking both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>",
			content: "Checking both.", calls: []string{`call_1 a {}`, `call_2 b {"x": 1}`}},
		{name: "no tools offered", in: "<tool_call>{\"name\": \"a\"}</tool_call>", content: "<tool_call>{\"name\": \"a\"}</tool_call>"},
		{name: "bad tool JSON stays text", tools: true, in: "<tool_call>\n{name: a}\n</tool_call>", content: "<tool_call>\n{name: a}\n</tool_call>"},
		{name: "unclosed tool call stays text", tools: true, in: "x <tool_call>\n{\"name\"", content: "x<tool_call>\n{\"name\""},
		{name: "lookalike tag", in: "a <thin b <tool c", tools: true, content: "a <thin b <tool c"},
	} {
		content, reasoning, calls := collect(c.in, nil, c.tools, c.inThink)
		if content != c.content || reasoning != c.reasoning || fmt.Sprint(calls) != fmt.Sprint(c.calls) {
			t.Errorf("%s: got content %q, reasoning %q, calls %q; want %q, %q, %q", c.name, content, reasoning, calls, c.content, c.reasoning, c.calls)
			continue
		}
		for i := 0; i <= len(c.in); i++ {
			for j := i; j <= len(c.in); j += 3 {
				gc, gr, gcalls := collect(c.in, []int{i, j}, c.tools, c.inThink)
				if gc != content || gr != reasoning || fmt.Sprint(gcalls) != fmt.Sprint(calls) {
					t.Fatalf("%s cut at %d and %d: content %q, reasoning %q, calls %q", c.name, i, j, gc, gr, gcalls)
				}
			}
		}
	}
}
