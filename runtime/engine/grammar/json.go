package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// The whitespace policy: between JSON tokens at most one of a single space,
// or a newline followed by up to maxIndent spaces or tabs (llama.cpp's
// json-schema-to-grammar policy), and none before or after the value. A
// model can pretty-print up to ten levels deep at two spaces but cannot
// loop on whitespace.
const maxIndent = 20

// Digit bounds keep a number from growing forever: an integer part of up
// to 16 digits, a fraction of up to 16, an exponent of up to 3.
const (
	maxIntDigits  = 16
	maxFracDigits = 16
	maxExpDigits  = 3
)

// jsonRules are the rules every JSON grammar of a Builder shares.
type jsonRules struct {
	ws, value, object, array, str, num, integer, boolean, null Ref
	made                                                       bool
}

// json returns the Builder's shared JSON rules, declaring them on first use.
func (b *Builder) json() *jsonRules {
	j := &b.jr
	if j.made {
		return j
	}
	j.made = true
	indent := b.Repeat("indent", Class(' ', ' ', '\t', '\t'), 0, maxIndent)
	j.ws = b.Rule("ws")
	b.Define(j.ws, nil, []Sym{Lit(" ")}, []Sym{Lit("\n"), R(indent)})
	ws := R(j.ws)

	j.str = b.Seq("string", Lit(`"`), Str(0, -1))
	digit := Class('0', '9')
	intPart := b.Rule("int-part")
	b.Define(intPart, []Sym{Lit("0")}, []Sym{Class('1', '9'), R(b.Repeat("digits", digit, 0, maxIntDigits-1))})
	minus := b.Opt("minus", Lit("-"))
	j.integer = b.Seq("integer", R(minus), R(intPart))
	frac := b.Opt("frac", Lit("."), R(b.Repeat("frac-digits", digit, 1, maxFracDigits)))
	exp := b.Opt("exp", Class('e', 'e', 'E', 'E'), R(b.Opt("sign", Class('+', '+', '-', '-'))), R(b.Repeat("exp-digits", digit, 1, maxExpDigits)))
	j.num = b.Seq("number", R(minus), R(intPart), R(frac), R(exp))
	j.boolean = b.Rule("boolean")
	b.Define(j.boolean, []Sym{Lit("true")}, []Sym{Lit("false")})
	j.null = b.Seq("null", Lit("null"))

	j.value = b.Rule("value")
	// {"key": value, …} with any keys; [value, …].
	kv := b.Seq("any-kv", R(j.str), ws, Lit(":"), ws, R(j.value), ws)
	moreKV := b.Rule("any-kv*")
	b.Define(moreKV, []Sym{Lit(","), ws, R(kv), R(moreKV)}, nil)
	j.object = b.Seq("object", Lit("{"), ws, R(b.Opt("any-members", R(kv), R(moreKV))), Lit("}"))
	item := b.Seq("any-item", R(j.value), ws)
	moreItems := b.Rule("any-item*")
	b.Define(moreItems, []Sym{Lit(","), ws, R(item), R(moreItems)}, nil)
	j.array = b.Seq("array", Lit("["), ws, R(b.Opt("any-items", R(item), R(moreItems))), Lit("]"))
	b.Define(j.value, []Sym{R(j.object)}, []Sym{R(j.array)}, []Sym{R(j.str)}, []Sym{R(j.num)},
		[]Sym{R(j.boolean)}, []Sym{R(j.null)})
	return j
}

// JSONValue is a rule matching any JSON value.
func (b *Builder) JSONValue() Ref { return b.json().value }

// JSONObject is a rule matching any JSON object.
func (b *Builder) JSONObject() Ref { return b.json().object }

// WS is a rule matching the whitespace allowed between JSON tokens.
func (b *Builder) WS() Ref { return b.json().ws }

// JSONValue is the grammar of any JSON value.
func JSONValue() *Grammar {
	b := NewBuilder()
	g, _ := b.Build(b.JSONValue())
	return g
}

// JSONObject is the grammar of any JSON object (OpenAI's json_object).
func JSONObject() *Grammar {
	b := NewBuilder()
	g, _ := b.Build(b.JSONObject())
	return g
}

// FromSchema is the grammar of the JSON values a JSON Schema accepts.
func FromSchema(schema []byte) (*Grammar, error) {
	b := NewBuilder()
	r, err := b.Schema(schema)
	if err != nil {
		return nil, err
	}
	return b.Build(r)
}

// SchemaError is a schema the compiler refuses: where (a JSON pointer into
// the schema), the keyword, and why.
type SchemaError struct {
	Path, Keyword, Msg string
}

func (e *SchemaError) Error() string {
	at := e.Path
	if at == "" {
		at = "#"
	}
	if e.Keyword != "" {
		return fmt.Sprintf("JSON schema at %s: keyword %q: %s", at, e.Keyword, e.Msg)
	}
	return fmt.Sprintf("JSON schema at %s: %s", at, e.Msg)
}

// ordered is a JSON object with its keys in document order.
type ordered struct {
	keys []string
	m    map[string]any
}

// parseOrdered decodes JSON keeping object key order; numbers stay
// json.Number, so literals keep their spelling.
func parseOrdered(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := parseValue(d)
	if err != nil {
		return nil, err
	}
	if d.More() {
		return nil, fmt.Errorf("trailing data after the schema")
	}
	return v, nil
}

func parseValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &ordered{m: map[string]any{}}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			key := k.(string)
			v, err := parseValue(d)
			if err != nil {
				return nil, err
			}
			if _, dup := o.m[key]; !dup {
				o.keys = append(o.keys, key)
			}
			o.m[key] = v
		}
		_, err := d.Token()
		return o, err
	case json.Delim('['):
		var a []any
		for d.More() {
			v, err := parseValue(d)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := d.Token()
		return a, err
	}
	return t, nil
}

// marshalOrdered writes v as compact JSON (objects in their order), as the
// literal an enum or const value is generated as.
func marshalOrdered(v any) string {
	switch x := v.(type) {
	case *ordered:
		var sb strings.Builder
		sb.WriteString("{")
		for i, k := range x.keys {
			if i > 0 {
				sb.WriteString(",")
			}
			sb.WriteString(quote(k) + ":" + marshalOrdered(x.m[k]))
		}
		sb.WriteString("}")
		return sb.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = marshalOrdered(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case nil:
		return "null"
	case string:
		return quote(x)
	}
	return fmt.Sprint(v) // bool, json.Number
}

// quote is s as a JSON string, without HTML escaping.
func quote(s string) string {
	var buf bytes.Buffer
	e := json.NewEncoder(&buf)
	e.SetEscapeHTML(false)
	e.Encode(s)
	return strings.TrimRight(buf.String(), "\n")
}
