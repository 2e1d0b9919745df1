package grammar

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// run feeds s and reports whether the grammar is still alive and whether s
// is a whole sentence.
func run(g *Grammar, s string) (alive, complete bool) {
	st := g.Start().AdvanceBytes([]byte(s))
	return !st.Dead(), st.Complete()
}

func checkTexts(t *testing.T, g *Grammar, good, prefixes, bad []string) {
	t.Helper()
	for _, s := range good {
		if alive, complete := run(g, s); !alive || !complete {
			t.Errorf("%q: alive %v complete %v, want a whole sentence", s, alive, complete)
		}
	}
	for _, s := range prefixes {
		if alive, complete := run(g, s); !alive || complete {
			t.Errorf("%q: alive %v complete %v, want an unfinished prefix", s, alive, complete)
		}
	}
	for _, s := range bad {
		if alive, _ := run(g, s); alive {
			t.Errorf("%q: accepted as a prefix, want refused", s)
		}
	}
}

func TestJSONValue(t *testing.T) {
	good := []string{`{}`, `[]`, `0`, `-0.5`, `1e10`, `2.5E-3`, `true`, `null`, `"héllo"`, `"\u00e9\n\"\\"`,
		`{"a": [1, 2.5e-3, true, null, "x"], "b": {}}`, "{\n  \"a\": 1,\n  \"b\": [\n    2\n  ]\n}", `[ 1 , 2 ]`,
		`"日本語 🙂"`, `{"":""}`}
	prefixes := []string{`{`, `{"a"`, `{"a":`, `1.`, `"abc`, `"\u00`, `-`, `[1,`, "\"\xe6\x97"}
	bad := []string{`{,}`, `{"a" 1}`, `01`, `[1,]`, "\"\x01\"", "\"\xff\"", "\"\xed\xa0\x80\"", `{  "a":1}`,
		"{\n" + strings.Repeat(" ", maxIndent+1) + `"a":1}`, ` {}`, `{}x`, `{} `, `tru e`, `"\x"`, `"\u00g0"`,
		`1.5.`, `--1`, `12345678901234567`, `{"a":1}}`}
	checkTexts(t, JSONValue(), good, prefixes, bad)
	// json_object: objects only.
	checkTexts(t, JSONObject(), []string{`{"x": [1]}`}, nil, []string{`[]`, `1`, `"a"`})
}

func mustSchema(t *testing.T, s string) *Grammar {
	t.Helper()
	g, err := FromSchema([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func TestSchemaObject(t *testing.T) {
	g := mustSchema(t, `{"type": "object", "properties": {
		"a": {"type": "integer"},
		"b": {"enum": ["x", "y", 3]},
		"c": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2}},
		"required": ["a", "b"]}`)
	good := []string{`{"a": 1, "b": "x"}`, `{"a":-7,"b":3}`, `{"a": 1, "b": "y", "c": [1.5]}`, `{"a": 0, "b": "x", "c": [1, 2]}`}
	prefixes := []string{`{"a": 1`, `{"a": 1, "b": "x", "c": [1, 2`}
	bad := []string{`{"b": "x", "a": 1}`, `{"a": 1}`, `{"a": 1.5`, `{"a": 1, "b": "z"`, `{"a": 1, "b": "x", "d"`,
		`{"a": 1, "b": "x", "c": []`, `{"a": 1, "b": "x", "c": [1, 2, 3`, `{"a": 1, "b": "x", "a"`, `{}`}
	checkTexts(t, g, good, prefixes, bad)

	// Optional properties keep their order and may be skipped; extra keys
	// only with additionalProperties.
	g = mustSchema(t, `{"properties": {"p": {"type": "boolean"}, "q": {"type": "null"}}, "additionalProperties": {"type": "string"}}`)
	checkTexts(t, g, []string{`{}`, `{"q": null}`, `{"p": true, "q": null}`, `{"p": false, "zz": "s"}`, `{"k": "v", "l": "w"}`},
		nil, []string{`{"q": null, "p": true`, `{"zz": 1`, `{"p": true,}`, `{"q": null, "p": "s"`, `{"\u0070": "s"`})
	// Other keys never repeat a declared one, whatever they share with it.
	checkTexts(t, g, []string{`{"pp": "s"}`, `{"": "s"}`, `{"qé": "s", "p\n": "t"}`, `{"é": "s"}`}, nil, nil)

	// A bare object schema takes any object.
	checkTexts(t, mustSchema(t, `{"type": "object"}`), []string{`{"any": [1, {"x": null}]}`, `{}`}, nil, []string{`[`})
}

func TestSchemaKeywords(t *testing.T) {
	cases := []struct {
		schema           string
		good, pre, wrong []string
	}{
		{`{"type": ["string", "null"], "minLength": 2, "maxLength": 3}`,
			[]string{`"ab"`, `"a\nc"`, `"日本"`, `null`}, []string{`"a`}, []string{`"a"`, `"abcd`, `1`}},
		{`{"const": {"k": [1, "two"]}}`, []string{`{"k":[1,"two"]}`}, nil, []string{`{"k": [`}},
		{`{"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}]}`,
			[]string{`12`, `{"n": "x"}`}, nil, []string{`"s"`, `{}`, `1.5`}},
		{`{"oneOf": [{"type": "boolean"}, {"type": "number"}]}`, []string{`true`, `1.5`}, nil, []string{`null`}},
		{`{"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}`,
			[]string{`["a", 1]`, `["a"]`, `[]`}, nil, []string{`[1`, `["a", 1, 2`}},
		{`{"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "null"}, "minItems": 2}`,
			[]string{`["a", null]`, `["a", null, null]`}, []string{`["a"`}, []string{`["a"]`, `["a", 1`}},
		{`{"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"]}}, "$ref": "#/$defs/node"}`,
			[]string{`{"v": 1}`, `{"v": 1, "kids": [{"v": 2, "kids": []}, {"v": 3}]}`}, nil, []string{`{"v": 1, "kids": [{}`}},
		{`{"type": "string", "nullable": true}`, []string{`"x"`, `null`}, nil, []string{`1`}},
		{`{"type": "array", "maxItems": 0}`, []string{`[]`}, nil, []string{`[1`}},
		{`true`, []string{`[1, {"a": null}]`}, nil, nil},
		{`{"description": "any value", "title": "t", "format": "date-time"}`, []string{`"x"`, `1`}, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.schema, func(t *testing.T) { checkTexts(t, mustSchema(t, c.schema), c.good, c.pre, c.wrong) })
	}
}

func TestSchemaErrors(t *testing.T) {
	cases := []struct{ schema, keyword, path string }{
		{`{"type": "string", "pattern": "^a"}`, "pattern", "#"},
		{`{"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}}`, "minimum", "#/properties/n"},
		{`{"type": "date"}`, "type", "#"},
		{`{"$ref": "https://example.com/s.json"}`, "$ref", "#"},
		{`{"$ref": "#/$defs/missing"}`, "$ref", "#"},
		{`{"type": "array", "items": [{"type": "string"}]}`, "items", "#"},
		{`{"enum": []}`, "enum", "#"},
		{`{"type": "string", "maxLength": -1}`, "maxLength", "#"},
		{`{"anyOf": [{"type": "string"}], "type": "string"}`, "type", "#"},
		{`{"not": {}}`, "not", "#"},
		{`{"type": "array", "minItems": 3, "maxItems": 2}`, "maxItems", "#"},
		{`{"type": "array", "maxItems": 1000000}`, "maxItems", "#"},
		{`{"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}`, "$ref", ""},
	}
	for _, c := range cases {
		_, err := FromSchema([]byte(c.schema))
		var se *SchemaError
		if !errors.As(err, &se) || se.Keyword != c.keyword || se.Path != c.path {
			t.Errorf("%s: got %v, want a SchemaError for %q at %s", c.schema, err, c.keyword, c.path)
			continue
		}
		if !strings.Contains(err.Error(), c.keyword) {
			t.Errorf("%s: the message %q does not name %q", c.schema, err, c.keyword)
		}
	}
	// A schema that only refers to itself matches nothing: refused, not hung.
	// Nested alternatives of distinct objects stay bounded.
	nested := `{"type": "object", "properties": {"v": {"type": "integer"}}}`
	for range 12 {
		nested = `{"anyOf": [` + nested + `, ` + nested + `]}`
	}
	{
		g, err := FromSchema([]byte(nested))
		if err != nil {
			t.Fatal(err)
		}
		if st := g.Start().AdvanceBytes([]byte(`{"v": 1}`)); !st.Complete() || len(st.stacks) > maxStacks {
			t.Errorf("nested anyOf: complete %v with %d stacks", st.Complete(), len(st.stacks))
		}
	}
	if _, err := FromSchema([]byte(`{"type":`)); err == nil {
		t.Error("a schema that is not JSON was accepted")
	}
	if _, err := FromSchema([]byte(`false`)); err == nil {
		t.Error("the schema false was accepted")
	}
}

// Until and the literal markup around a value: a tool call's tags after an
// optional thinking block.
func TestMarkup(t *testing.T) {
	b := NewBuilder()
	think := b.Opt("think", Lit("<think>"), Until("</think>"), Lit("\n\n"))
	call := b.Seq("call", R(think), Lit("<tool_call>\n"), R(b.JSONObject()), Lit("\n</tool_call>"))
	g, err := b.Build(call)
	if err != nil {
		t.Fatal(err)
	}
	checkTexts(t, g,
		[]string{"<tool_call>\n{}\n</tool_call>", "<think>a </thin <</think>\n\n<tool_call>\n{\"a\": 1}\n</tool_call>", "<think></think>\n\n<tool_call>\n{}\n</tool_call>"},
		[]string{"<think>x</think", "<think></think>\n\n"},
		[]string{"hello", "<think>x</think>\n\nhi", "<tool_call>\n[]"})
	if !g.Start().AdvanceBytes([]byte("<tool_call>\n{}\n</tool_call>")).Final() {
		t.Error("a whole call is not final")
	}
}

// A long enum shares its prefixes, so its parse stacks are the bytes that
// may come next, not the values that may still match; every value (only
// those) matches.
func TestLiterals(t *testing.T) {
	var vals []string
	for i := range 1000 {
		vals = append(vals, fmt.Sprintf(`"item-%03d"`, i))
	}
	g := mustSchema(t, `{"enum": [`+strings.Join(vals, ", ")+`, "item", 7]}`)
	checkTexts(t, g, append(vals[:10:10], `"item"`, `7`, `"item-999"`), []string{`"item-00`, `"item-`},
		[]string{`"item-1000"`, `"item-0"`, `"items"`, `8`, `"item-00a"`})
	// One stack per byte that may come next (the ten digits), not one per
	// value that may still match (a hundred).
	if n := len(g.Start().AdvanceBytes([]byte(`"item-5`)).stacks); n > 10 {
		t.Errorf("%d parse stacks inside the enum, want at most 10", n)
	}
	b := NewBuilder()
	one, two := b.Seq("one", Lit("1")), b.Seq("two", Lit("2"))
	g, err := b.Build(b.Literals("x", []string{"ab", "abc", "b"}, []Ref{one, two, two}))
	if err != nil {
		t.Fatal(err)
	}
	checkTexts(t, g, []string{"ab1", "abc2", "b2"}, []string{"ab", "abc"}, []string{"ab2", "abc1", "b1", "ac"})
}
