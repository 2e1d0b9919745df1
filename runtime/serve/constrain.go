package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/strata-llm/strata/runtime/engine/grammar"
)

// responseFormat is the request's response_format: text, json_object, or
// json_schema with {name, schema, strict}.
type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	} `json:"json_schema"`
}

// vocab is the model's vocabulary as grammar tries, built on first use and
// shared by every constrained request. Special tokens are never allowed;
// the stop ids are given to each constraint apart.
func (s *Server) vocab() *grammar.Vocab {
	s.vocabOnce.Do(func() {
		tok := s.opt.Text.Tok
		s.grammarVocab = grammar.NewVocab(tok.Vocab(), tok.TokenBytes, tok.IsSpecial)
	})
	return s.grammarVocab
}

// constraint is a fresh grammar state for one generation of g (nil: none).
func (s *Server) constraint(g *grammar.Grammar) *grammar.Constraint {
	if g == nil {
		return nil
	}
	return grammar.NewConstraint(g, s.vocab(), s.opt.Generate.EOS)
}

// formatGrammar reads response_format into a rule of b: nil for text (or
// absent), a JSON object for json_object, the schema's values for
// json_schema; or llama-server's grammar field (GBNF).
func formatGrammar(b *grammar.Builder, q *sampling) (*grammar.Ref, *apiError) {
	rf := q.ResponseFormat
	if q.Grammar != "" {
		if rf != nil && rf.Type != "" && rf.Type != "text" {
			return nil, badRequest("grammar", "invalid_value", "field \"grammar\": give a grammar or a response_format of type %q, not both", rf.Type)
		}
		r, err := b.GBNF(q.Grammar)
		if err != nil {
			return nil, badRequest("grammar", "invalid_grammar", "field \"grammar\": %v", err)
		}
		return &r, nil
	}
	if rf == nil {
		return nil, nil
	}
	switch rf.Type {
	case "", "text":
		return nil, nil
	case "json_object":
		r := b.JSONObject()
		return &r, nil
	case "json_schema":
		if rf.JSONSchema == nil || len(bytes.TrimSpace(rf.JSONSchema.Schema)) == 0 || string(bytes.TrimSpace(rf.JSONSchema.Schema)) == "null" {
			return nil, badRequest("response_format.json_schema.schema", "missing_field",
				"field \"response_format.json_schema.schema\" is required with type \"json_schema\": the JSON Schema the reply must follow")
		}
		r, err := b.Schema(rf.JSONSchema.Schema)
		if err != nil {
			return nil, schemaError("response_format.json_schema.schema", err)
		}
		return &r, nil
	}
	return nil, badRequest("response_format.type", "invalid_value",
		"field \"response_format.type\": expected \"text\", \"json_object\" or \"json_schema\", got %q", rf.Type)
}

// schemaError is a 400 naming the schema's field, with the compiler's
// reason (the keyword and where in the schema).
func schemaError(param string, err error) *apiError {
	return badRequest(param, "invalid_schema", "field %q: %v", param, err)
}

// toolSpec is a tool of the request as far as forcing a call needs it.
type toolSpec struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// toolChoice reads tool_choice: "none", "auto", "required", or
// {"type": "function", "function": {"name": …}}; forced says a call must
// come, name (when set) which function's.
func toolChoice(raw json.RawMessage) (mode, name string, e *apiError) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "auto", "", nil
	}
	var str string
	if json.Unmarshal(raw, &str) == nil {
		switch str {
		case "none", "auto", "required":
			return str, "", nil
		}
		return "", "", badRequest("tool_choice", "invalid_value", "field \"tool_choice\": expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}, got %q", str)
	}
	var obj struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &obj) != nil || obj.Type != "function" || obj.Function.Name == "" {
		return "", "", badRequest("tool_choice", "invalid_value", "field \"tool_choice\": expected \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": …}}")
	}
	return "function", obj.Function.Name, nil
}

// toolCallGrammar is a rule for the tool calls the chat template writes
// (Qwen's: <tool_call>\n{"name": "NAME", "arguments": ARGS}\n</tool_call>,
// calls apart by a newline): one call of the named function, or one or
// more calls of any tool (required; one with parallel_tool_calls false),
// the arguments following each
// function's parameters schema (any object when it has none).
func toolCallGrammar(b *grammar.Builder, rawTools json.RawMessage, name string, parallel bool) (grammar.Ref, *apiError) {
	var tools []toolSpec
	if err := json.Unmarshal(rawTools, &tools); err != nil {
		return 0, badRequest("tools", "invalid_type", "field \"tools\": expected an array of {\"type\": \"function\", \"function\": {…}} objects")
	}
	var names []string
	var rests []grammar.Ref
	for i, t := range tools {
		param := fmt.Sprintf("tools[%d].function", i)
		if t.Type != "function" || t.Function.Name == "" {
			return 0, badRequest(param, "invalid_value", "field %q: expected {\"name\": …, \"parameters\": …} of a tool of type \"function\"", param)
		}
		if name != "" && t.Function.Name != name {
			continue
		}
		args := b.JSONObject()
		if p := bytes.TrimSpace(t.Function.Parameters); len(p) > 0 && string(p) != "null" {
			var err error
			if args, err = b.Schema(p); err != nil {
				return 0, schemaError(param+".parameters", err)
			}
		}
		names = append(names, quoteJSON(t.Function.Name)+", \"arguments\": ")
		rests = append(rests, b.Seq("call "+t.Function.Name, grammar.R(args), grammar.Lit("}\n"+toolClose)))
	}
	if len(names) == 0 {
		if name != "" {
			return 0, badRequest("tool_choice", "invalid_value", "field \"tool_choice\": no tool named %q in \"tools\"", name)
		}
		return 0, badRequest("tools", "invalid_value", "field \"tools\" is empty: tool_choice \"required\" needs a tool to call")
	}
	// The names share a trie: one parse stack until they differ.
	call := b.Seq("call", grammar.Lit(toolOpen+"\n{\"name\": "), grammar.R(b.Literals("name", names, rests)))
	if name != "" || !parallel {
		return call, nil
	}
	more := b.Rule("more calls")
	b.Define(more, nil, []grammar.Sym{grammar.Lit("\n"), grammar.R(call), grammar.R(more)})
	return b.Seq("calls", grammar.R(call), grammar.R(more)), nil
}

// withThinking puts a reasoning block before body: when the prompt opened
// it (inThink), its rest up to </think>; when the model may open one
// (mayThink), an optional whole block. Up to four whitespace bytes may follow it (Qwen
// writes "\n\n").
func withThinking(b *grammar.Builder, body grammar.Ref, inThink, mayThink bool) grammar.Ref {
	sep := b.Repeat("think-sep", grammar.Class(' ', ' ', '\t', '\n', '\r', '\r'), 0, 4)
	switch {
	case inThink:
		return b.Seq("reply", grammar.Until(thinkClose), grammar.R(sep), grammar.R(body))
	case mayThink:
		think := b.Opt("think", grammar.Lit(thinkOpen), grammar.Until(thinkClose), grammar.R(sep))
		return b.Seq("reply", grammar.R(think), grammar.R(body))
	}
	return body
}

func quoteJSON(s string) string {
	b, _ := jsonMarshal(s)
	return string(b)
}

// chatGrammar is the grammar a chat request's reply must follow, or nil:
// a forced tool call (tool_choice "required" or a named function) or the
// response_format, after any reasoning block.
func (s *Server) chatGrammar(req *chatRequest, tools bool, rendered string) (*grammar.Grammar, *apiError) {
	mode, name, e := toolChoice(req.ToolChoice)
	if e != nil {
		return nil, e
	}
	forced := mode == "required" || mode == "function"
	b := grammar.NewBuilder()
	body, e := formatGrammar(b, &req.sampling)
	if e != nil {
		return nil, e
	}
	if forced {
		if !tools {
			return nil, badRequest("tool_choice", "invalid_value", "field \"tool_choice\": a tool call is forced, but the request has no \"tools\"")
		}
		if body != nil {
			return nil, badRequest("response_format", "invalid_value", "field \"response_format\": the reply is a forced tool call (tool_choice), so it cannot also follow response_format or grammar")
		}
		r, e := toolCallGrammar(b, req.Tools, name, req.ParallelToolCalls == nil || *req.ParallelToolCalls)
		if e != nil {
			return nil, e
		}
		body = &r
	}
	if body == nil {
		return nil, nil
	}
	// The prompt may have opened the reasoning block (the model writes the
	// rest), closed it (thinking off), or left it to the model where the
	// template knows the tags.
	end := strings.TrimRight(rendered, " \n")
	inThink := strings.HasSuffix(end, thinkOpen)
	mayThink := !inThink && !strings.HasSuffix(end, thinkClose) && strings.Contains(s.opt.Text.TemplateSource, thinkClose)
	root := withThinking(b, *body, inThink, mayThink)
	g, err := b.Build(root)
	if err != nil {
		return nil, badRequest("", "invalid_value", "building the reply's grammar: %v", err)
	}
	return g, nil
}

// textGrammar is /v1/completions' grammar: the response_format (or
// grammar) alone.
func textGrammar(q *sampling) (*grammar.Grammar, *apiError) {
	b := grammar.NewBuilder()
	body, e := formatGrammar(b, q)
	if e != nil || body == nil {
		return nil, e
	}
	g, err := b.Build(*body)
	if err != nil {
		return nil, badRequest("response_format", "invalid_value", "building the reply's grammar: %v", err)
	}
	return g, nil
}
