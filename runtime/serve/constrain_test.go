package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/strata-llm/strata/runtime/engine"
)

// record is the reply the schema below describes, decoded strictly: every
// field present (pointers), no other field.
type record struct {
	Name *string  `json:"name"`
	N    *int64   `json:"n"`
	Tags []string `json:"tags"`
	OK   *bool    `json:"ok"` // or null: then OK stays nil, and Set says it was there
}

const recordSchema = `{"type": "object", "properties": {
	"name": {"type": "string", "minLength": 1, "maxLength": 10},
	"n": {"type": "integer"},
	"tags": {"type": "array", "items": {"enum": ["red", "green"]}, "maxItems": 3},
	"ok": {"type": ["boolean", "null"]}},
	"required": ["name", "n", "tags", "ok"], "additionalProperties": false}`

// checkRecord holds text to recordSchema by hand: strict decoding, the
// keys in order, the bounds and the enum.
func checkRecord(t *testing.T, text string) {
	t.Helper()
	var r record
	d := json.NewDecoder(strings.NewReader(text))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil || d.More() {
		t.Fatalf("%q does not decode as the schema's object: %v", text, err)
	}
	var raw map[string]json.RawMessage
	json.Unmarshal([]byte(text), &raw)
	if _, ok := raw["ok"]; !ok || r.Name == nil || r.N == nil || r.Tags == nil {
		t.Fatalf("%q: a required field is missing", text)
	}
	if n := utf8.RuneCountInString(*r.Name); n < 1 || n > 10 {
		t.Errorf("%q: name of %d characters, want 1 to 10", text, n)
	}
	if len(r.Tags) > 3 {
		t.Errorf("%q: %d tags, want at most 3", text, len(r.Tags))
	}
	for _, tag := range r.Tags {
		if tag != "red" && tag != "green" {
			t.Errorf("%q: tag %q is not in the enum", text, tag)
		}
	}
}

// A json_schema reply of the real (random-weights) model parses with the
// schema, greedy and sampled, streamed and not; the same request without
// the format does not (so the constraint is what makes it JSON).
func TestResponseFormatSchema(t *testing.T) {
	ts, _ := startReal(t, nil)
	format := `"response_format": {"type": "json_schema", "json_schema": {"name": "record", "strict": true, "schema": ` + recordSchema + `}}`
	for _, sampling := range []string{`"temperature": 0`, `"temperature": 1, "seed": 1`, `"temperature": 1, "seed": 2, "top_k": 40, "top_p": 0.9`} {
		body := `{"messages": [{"role": "user", "content": "Describe a record."}], "max_tokens": 400,
			"chat_template_kwargs": {"enable_thinking": false}, ` + sampling + `, ` + format + `}`
		code, b, _ := post(t, ts.URL+"/v1/chat/completions", body)
		r := decode[chatReply](t, b)
		if code != 200 || len(r.Choices) != 1 || r.Choices[0].Message == nil || r.Choices[0].Message.Content == nil {
			t.Fatalf("%s: status %d: %s", sampling, code, b)
		}
		text := *r.Choices[0].Message.Content
		checkRecord(t, text)
		if f := r.Choices[0].FinishReason; f == nil || *f != "stop" {
			t.Errorf("%s: finish reason %v, want stop", sampling, f)
		}
		t.Logf("%s: %s", sampling, text)

		// Streamed: the deltas make the same text.
		code, b, _ = post(t, ts.URL+"/v1/chat/completions", strings.Replace(body, `"max_tokens"`, `"stream": true, "max_tokens"`, 1))
		var sb strings.Builder
		for _, e := range events(t, b) {
			if e == "[DONE]" {
				continue
			}
			if c := decode[chatReply](t, []byte(e)); len(c.Choices) > 0 && c.Choices[0].Delta != nil && c.Choices[0].Delta.Content != nil {
				sb.WriteString(*c.Choices[0].Delta.Content)
			}
		}
		if code != 200 || sb.String() != text {
			t.Errorf("%s: streamed %q (status %d), not streamed %q", sampling, sb.String(), code, text)
		}
	}
	code, b, _ := post(t, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "Describe a record."}], "max_tokens": 60,
		"chat_template_kwargs": {"enable_thinking": false}}`)
	if r := decode[chatReply](t, b); code != 200 || json.Valid([]byte(*r.Choices[0].Message.Content)) {
		t.Errorf("unconstrained: status %d, reply %s: expected text that is not JSON", code, b)
	}

	// /v1/completions takes response_format too.
	code, b, _ = post(t, ts.URL+"/v1/completions", `{"prompt": "record:", "max_tokens": 400, `+format+`}`)
	var tr struct{ Choices []struct{ Text string } }
	if err := json.Unmarshal(b, &tr); code != 200 || err != nil || len(tr.Choices) != 1 {
		t.Fatalf("completions: status %d: %s", code, b)
	}
	checkRecord(t, tr.Choices[0].Text)
}

// llama-server's grammar field (GBNF) constrains chat and text replies.
func TestGrammarField(t *testing.T) {
	ts, _ := startReal(t, nil)
	gbnf := `root ::= (\"yes\" | \"no\") \", \" [0-9]{1,3}`
	re := regexp.MustCompile(`^(yes|no), [0-9]{1,3}$`)
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "yes?"}], "chat_template_kwargs": {"enable_thinking": false}, "max_tokens": 50, "grammar": "` + gbnf + `"}`},
		{"/v1/completions", `{"prompt": "answer:", "temperature": 1, "seed": 3, "max_tokens": 50, "grammar": "` + gbnf + `"}`},
	} {
		code, b, _ := post(t, ts.URL+c.path, c.body)
		var r struct {
			Choices []struct {
				Text    string
				Message *message
			}
		}
		if err := json.Unmarshal(b, &r); code != 200 || err != nil || len(r.Choices) != 1 {
			t.Fatalf("%s: status %d: %s", c.path, code, b)
		}
		text := r.Choices[0].Text
		if m := r.Choices[0].Message; m != nil && m.Content != nil {
			text = *m.Content
		}
		if !re.MatchString(text) {
			t.Errorf("%s: %q does not follow the grammar", c.path, text)
		}
	}
}

// json_object: the reply is one JSON object.
func TestResponseFormatObject(t *testing.T) {
	ts, _ := startReal(t, nil)
	for _, seed := range []int{1, 2, 3} {
		code, b, _ := post(t, ts.URL+"/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": "JSON please"}],
			"chat_template_kwargs": {"enable_thinking": false}, "temperature": 1, "seed": %d, "max_tokens": 800,
			"response_format": {"type": "json_object"}}`, seed))
		r := decode[chatReply](t, b)
		if code != 200 {
			t.Fatalf("status %d: %s", code, b)
		}
		text := *r.Choices[0].Message.Content
		if *r.Choices[0].FinishReason == "length" {
			// Cut by max_tokens: still a prefix of an object.
			if !strings.HasPrefix(text, "{") {
				t.Errorf("seed %d: %q, cut short, does not start an object", seed, text)
			}
			t.Logf("seed %d: cut by max_tokens", seed)
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal([]byte(text), &obj); err != nil {
			t.Errorf("seed %d: %q is not a JSON object: %v", seed, text, err)
		}
		t.Logf("seed %d: %s", seed, text)
	}
}

// A forced tool call: a named function, or "required" (one call with
// parallel_tool_calls false); its arguments follow its parameters.
func TestForcedToolCall(t *testing.T) {
	ts, _ := startReal(t, nil)
	tools := `"tools": [
		{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {"q": {"type": "string", "maxLength": 8}}, "required": ["q"]}}},
		{"type": "function", "function": {"name": "get_weather", "description": "weather",
			"parameters": {"type": "object", "properties": {"city": {"type": "string", "minLength": 1, "maxLength": 12}, "days": {"type": "integer"}},
			"required": ["city", "days"], "additionalProperties": false}}}]`
	for _, c := range []struct{ choice, want string }{
		{`{"type": "function", "function": {"name": "get_weather"}}`, "get_weather"},
		{`{"type": "function", "function": {"name": "lookup"}}`, "lookup"},
		{`"required", "parallel_tool_calls": false`, ""},
	} {
		for _, sampling := range []string{`"temperature": 0`, `"temperature": 1, "seed": 5`} {
			thinks := []string{"false", "true"}
			if raceEnabled {
				thinks = thinks[:1] // a random model's reasoning runs to max_tokens: 16× slower under -race
			}
			for _, think := range thinks {
				code, b, _ := post(t, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "Weather in Paris?"}], "max_tokens": 600,
					"chat_template_kwargs": {"enable_thinking": `+think+`}, `+sampling+`, `+tools+`, "tool_choice": `+c.choice+`}`)
				r := decode[chatReply](t, b)
				if code != 200 || len(r.Choices) != 1 {
					t.Fatalf("%s: status %d: %s", c.choice, code, b)
				}
				m := r.Choices[0].Message
				if f := r.Choices[0].FinishReason; f != nil && *f == "length" && think == "true" {
					t.Logf("%s, %s, thinking: cut by max_tokens inside the reasoning", c.choice, sampling)
					continue
				}
				if len(m.ToolCalls) != 1 || r.Choices[0].FinishReason == nil || *r.Choices[0].FinishReason != "tool_calls" {
					t.Fatalf("%s, %s, thinking %s: want one tool call, got %s", c.choice, sampling, think, b)
				}
				call := m.ToolCalls[0].Function
				if c.want != "" && call.Name != c.want {
					t.Errorf("%s: called %q", c.choice, call.Name)
				}
				d := json.NewDecoder(strings.NewReader(call.Arguments))
				d.DisallowUnknownFields()
				switch call.Name {
				case "get_weather":
					var a struct {
						City *string `json:"city"`
						Days *int64  `json:"days"`
					}
					if err := d.Decode(&a); err != nil || a.City == nil || a.Days == nil || utf8.RuneCountInString(*a.City) > 12 || *a.City == "" {
						t.Errorf("%s: arguments %q do not follow get_weather's parameters (%v)", c.choice, call.Arguments, err)
					}
				case "lookup":
					var a struct {
						Q *string `json:"q"`
					}
					if err := json.Unmarshal([]byte(call.Arguments), &a); err != nil || a.Q == nil || utf8.RuneCountInString(*a.Q) > 8 {
						t.Errorf("%s: arguments %q do not follow lookup's parameters (%v)", c.choice, call.Arguments, err)
					}
				default:
					t.Errorf("%s: called %q, no such tool", c.choice, call.Name)
				}
				t.Logf("%s, %s, thinking %s: %s(%s), reasoning %q", c.choice, sampling, think, call.Name, call.Arguments, m.ReasoningContent)
			}
		}
	}
}

// A forced call streams as one tool_calls delta, then finish_reason
// tool_calls.
func TestForcedToolCallStreamed(t *testing.T) {
	ts, _ := startReal(t, nil)
	code, b, _ := post(t, ts.URL+"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "stream": true,
		"chat_template_kwargs": {"enable_thinking": false}, "max_tokens": 300,
		"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]}}}],
		"tool_choice": {"type": "function", "function": {"name": "f"}}}`)
	if code != 200 {
		t.Fatalf("status %d: %s", code, b)
	}
	var calls []toolCall
	finish := ""
	for _, e := range events(t, b) {
		if e == "[DONE]" {
			continue
		}
		c := decode[chatReply](t, []byte(e))
		if len(c.Choices) == 0 {
			continue
		}
		if d := c.Choices[0].Delta; d != nil {
			calls = append(calls, d.ToolCalls...)
			if d.Content != nil && strings.TrimSpace(*d.Content) != "" {
				t.Errorf("content %q beside a forced call", *d.Content)
			}
		}
		if f := c.Choices[0].FinishReason; f != nil {
			finish = *f
		}
	}
	var args struct{ X *bool }
	if len(calls) != 1 || calls[0].Function.Name != "f" || json.Unmarshal([]byte(calls[0].Function.Arguments), &args) != nil || args.X == nil || finish != "tool_calls" {
		t.Errorf("calls %+v, finish %q: want one call of f with a boolean x, finish tool_calls", calls, finish)
	}
}

// Bad formats, schemas and tool choices are 400s naming the field.
func TestConstraintErrors(t *testing.T) {
	ts, _ := startReal(t, nil)
	msgs := `"messages": [{"role": "user", "content": "hi"}]`
	tool := `"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "string", "pattern": "^a"}}}}}]`
	for _, c := range []struct{ body, param, text string }{
		{`{` + msgs + `, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "string", "format": "email", "pattern": "@"}}}}`,
			"response_format.json_schema.schema", `"pattern"`},
		{`{` + msgs + `, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "int"}}}}}}`,
			"response_format.json_schema.schema", "#/properties/a"},
		{`{` + msgs + `, "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}}`, "response_format.json_schema.schema", "required"},
		{`{` + msgs + `, "response_format": {"type": "json_schema"}}`, "response_format.json_schema.schema", "required"},
		{`{"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {"$ref": "http://x/y"}}}}`, "response_format.json_schema.schema", "$ref"},
		{`{` + msgs + `, ` + tool + `, "tool_choice": "required"}`, "tools[0].function.parameters", `"pattern"`},
		{`{` + msgs + `, ` + tool + `, "tool_choice": {"type": "function", "function": {"name": "g"}}}`, "tool_choice", `"g"`},
		{`{` + msgs + `, "tool_choice": "required"}`, "tool_choice", "no \"tools\""},
		{`{` + msgs + `, ` + tool + `, "tool_choice": "always"}`, "tool_choice", "always"},
		{`{` + msgs + `, "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required", "response_format": {"type": "json_object"}}`, "response_format", "forced tool call"},
		{`{` + msgs + `, "grammar": "root ::= x"}`, "grammar", `rule "x" is used but not defined`},
		{`{"prompt": "x", "grammar": "root ::= \"a"}`, "grammar", "line 1, column 10"},
		{`{` + msgs + `, "grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}}`, "grammar", "not both"},
	} {
		path := "/v1/chat/completions"
		if strings.HasPrefix(c.body, `{"prompt"`) {
			path = "/v1/completions"
		}
		code, b, _ := post(t, ts.URL+path, c.body)
		r := decode[chatReply](t, b)
		if code != 400 || r.Error == nil || r.Error.Param == nil || *r.Error.Param != c.param || !strings.Contains(r.Error.Message, c.text) {
			t.Errorf("%.90s: status %d %s, want 400 with param %q and a message naming %s", c.body, code, bytes.TrimSpace(b), c.param, c.text)
		}
	}
	// Auto and none leave tools with a bad schema alone: nothing is forced.
	if code, b, _ := post(t, ts.URL+"/v1/chat/completions", `{`+msgs+`, `+tool+`, "tool_choice": "auto", "max_tokens": 2}`); code != 200 {
		t.Errorf("tool_choice auto with an unsupported schema: status %d %s", code, b)
	}
}

// With speculation on the server (suffix drafts), a constrained reply is
// the one it makes without, greedy and sampled, and drafts were fed.
func TestConstrainedWithSpeculation(t *testing.T) {
	format := `"response_format": {"type": "json_schema", "json_schema": {"name": "record", "schema": ` + recordSchema + `}}`
	bodies := []string{
		`{"messages": [{"role": "user", "content": "Describe a record."}], "max_tokens": 400, "chat_template_kwargs": {"enable_thinking": false}, "temperature": 0, ` + format + `}`,
		`{"messages": [{"role": "user", "content": "Describe a record."}], "max_tokens": 400, "chat_template_kwargs": {"enable_thinking": false}, "temperature": 1, "seed": 4, ` + format + `}`,
	}
	// Each server in a subtest: startReal holds the model until its test ends.
	replies := func(t *testing.T, sp engine.SpecOptions) []string {
		ts, _ := startReal(t, func(o *Options) { o.Generate.Spec = sp })
		var out []string
		for _, body := range bodies {
			code, b, _ := post(t, ts.URL+"/v1/chat/completions", body)
			r := decode[chatReply](t, b)
			if code != 200 || r.Choices[0].Message.Content == nil {
				t.Fatalf("status %d: %s", code, b)
			}
			checkRecord(t, *r.Choices[0].Message.Content)
			out = append(out, *r.Choices[0].Message.Content)
		}
		return out
	}
	var want, got []string
	st := &engine.SpecStats{}
	t.Run("plain", func(t *testing.T) { want = replies(t, engine.SpecOptions{}) })
	t.Run("drafts", func(t *testing.T) { got = replies(t, engine.SpecOptions{Depth: 3, SuffixDraft: 3, Stats: st}) })
	if len(want) != len(bodies) || len(got) != len(bodies) {
		t.Fatal("a request failed")
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("request %d: with drafts %q, without %q", i, got[i], want[i])
		}
	}
	if st.Drafted == 0 {
		t.Error("no draft was fed")
	}
	t.Logf("%d windows, %d drafted, %d accepted", st.Windows, st.Drafted, st.Accepted)
}
