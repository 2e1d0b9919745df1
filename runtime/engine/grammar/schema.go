package grammar

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// unsupported are the JSON Schema keywords that constrain values in ways
// the compiler does not enforce: a schema using one is refused, naming it.
var unsupported = map[string]bool{
	"pattern": true, "minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"multipleOf": true, "uniqueItems": true, "contains": true, "minContains": true, "maxContains": true,
	"minProperties": true, "maxProperties": true, "patternProperties": true, "propertyNames": true,
	"not": true, "if": true, "then": true, "else": true, "dependentRequired": true, "dependentSchemas": true,
	"dependencies": true, "unevaluatedProperties": true, "unevaluatedItems": true, "additionalItems": true,
	"$dynamicRef": true, "$recursiveRef": true,
}

// maxCounted is the largest minItems or maxItems the compiler takes.
const maxCounted = 1 << 14

// compiler turns one schema document into rules of a Builder.
type compiler struct {
	b    *Builder
	root any
	refs map[string]Ref // $ref target → its rule, so recursive schemas end
	utf8 *Ref           // utf8Char, once made
}

// Schema compiles a JSON Schema (a document; $ref points into it) into a
// rule of b matching the JSON values it accepts, with the whitespace policy
// of JSONValue. Supported: type (one or a list), properties, required,
// additionalProperties, enum, const, anyOf, oneOf (as anyOf), allOf of one
// schema, items, prefixItems, minItems, maxItems, minLength, maxLength,
// nullable, $ref to #… with $defs/definitions; annotations (title,
// description, format, default, …) are ignored. Properties are generated
// in the schema's order; without additionalProperties an object with
// properties takes no other keys, and with it the other keys come after
// the declared ones and never repeat one. A keyword that constrains values in
// another way is a *SchemaError naming it.
func (b *Builder) Schema(schema []byte) (Ref, error) {
	v, err := parseOrdered(schema)
	if err != nil {
		return 0, &SchemaError{Msg: fmt.Sprintf("not a JSON document: %v", err)}
	}
	c := &compiler{b: b, root: v, refs: map[string]Ref{}}
	r, err := c.compile(v, "#")
	switch {
	case err != nil:
	case len(b.g.elems) > MaxElems:
		err = &SchemaError{Msg: fmt.Sprintf("the schema makes a grammar of more than %d elements (large maxItems?)", MaxElems)}
	case b.matchesNothing(r):
		err = &SchemaError{Keyword: "$ref", Msg: "the schema accepts no value (a $ref that reaches itself before any value?)"}
	}
	return r, err
}

func (c *compiler) compile(v any, path string) (Ref, error) {
	j := c.b.json()
	switch s := v.(type) {
	case bool:
		if s {
			return j.value, nil
		}
		return 0, &SchemaError{Path: path, Msg: "the schema false accepts no value"}
	case *ordered:
		return c.schema(s, path)
	}
	return 0, &SchemaError{Path: path, Msg: fmt.Sprintf("expected a schema (an object or a boolean), got %s", marshalOrdered(v))}
}

func (c *compiler) schema(s *ordered, path string) (Ref, error) {
	b, j := c.b, c.b.json()
	if len(b.g.elems) > MaxElems {
		return 0, &SchemaError{Path: path, Msg: fmt.Sprintf("the schema makes a grammar of more than %d elements (large maxItems?)", MaxElems)}
	}
	for _, k := range s.keys {
		if unsupported[k] {
			return 0, &SchemaError{Path: path, Keyword: k, Msg: "not supported: the grammar cannot enforce it"}
		}
	}
	has := func(keys ...string) string {
		for _, k := range keys {
			if _, ok := s.m[k]; ok {
				return k
			}
		}
		return ""
	}
	structural := []string{"type", "properties", "required", "additionalProperties", "items", "prefixItems",
		"minItems", "maxItems", "minLength", "maxLength", "enum", "const"}
	if ref, ok := s.m["$ref"]; ok {
		if k := has(append(structural, "anyOf", "oneOf", "allOf")...); k != "" {
			return 0, &SchemaError{Path: path, Keyword: k, Msg: "not supported beside $ref"}
		}
		p, ok := ref.(string)
		if !ok {
			return 0, &SchemaError{Path: path, Keyword: "$ref", Msg: "expected a string"}
		}
		return c.ref(p, path)
	}
	r, err := c.typed(s, path, has)
	if err != nil {
		return 0, err
	}
	if n, ok := s.m["nullable"].(bool); ok && n {
		return b.Alt(path+"|null", r, j.null), nil
	}
	return r, nil
}

// typed compiles what the schema says apart from $ref and nullable.
func (c *compiler) typed(s *ordered, path string, has func(...string) string) (Ref, error) {
	b, j := c.b, c.b.json()
	for _, comb := range []string{"anyOf", "oneOf", "allOf"} {
		v, ok := s.m[comb]
		if !ok {
			continue
		}
		if k := has("type", "properties", "items", "prefixItems", "enum", "const"); k != "" {
			return 0, &SchemaError{Path: path, Keyword: k, Msg: fmt.Sprintf("not supported beside %s (put it in each alternative)", comb)}
		}
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return 0, &SchemaError{Path: path, Keyword: comb, Msg: "expected a non-empty array of schemas"}
		}
		if comb == "allOf" {
			if len(list) != 1 {
				return 0, &SchemaError{Path: path, Keyword: comb, Msg: "only an allOf of one schema is supported"}
			}
			return c.compile(list[0], path+"/allOf/0")
		}
		alts := make([]Ref, len(list))
		for i, a := range list {
			r, err := c.compile(a, fmt.Sprintf("%s/%s/%d", path, comb, i))
			if err != nil {
				return 0, err
			}
			alts[i] = r
		}
		return b.Alt(path, alts...), nil
	}
	if v, ok := s.m["const"]; ok {
		return b.Seq(path+"/const", Lit(marshalOrdered(v))), nil
	}
	if v, ok := s.m["enum"]; ok {
		list, ok := v.([]any)
		if !ok || len(list) == 0 {
			return 0, &SchemaError{Path: path, Keyword: "enum", Msg: "expected a non-empty array"}
		}
		lits := make([]string, len(list))
		for i, e := range list {
			lits[i] = marshalOrdered(e)
		}
		return b.Literals(path+"/enum", lits, nil), nil
	}
	var types []string
	switch t := s.m["type"].(type) {
	case nil:
		if _, ok := s.m["type"]; ok {
			return 0, &SchemaError{Path: path, Keyword: "type", Msg: "expected a type name or an array of them"}
		}
		switch {
		case has("properties", "required", "additionalProperties") != "":
			types = []string{"object"}
		case has("items", "prefixItems", "minItems", "maxItems") != "":
			types = []string{"array"}
		case has("minLength", "maxLength") != "":
			types = []string{"string"}
		default:
			return j.value, nil
		}
	case string:
		types = []string{t}
	case []any:
		for _, e := range t {
			name, ok := e.(string)
			if !ok {
				return 0, &SchemaError{Path: path, Keyword: "type", Msg: "expected an array of type names"}
			}
			types = append(types, name)
		}
		if len(types) == 0 {
			return 0, &SchemaError{Path: path, Keyword: "type", Msg: "an empty list of types accepts no value"}
		}
	default:
		return 0, &SchemaError{Path: path, Keyword: "type", Msg: "expected a type name or an array of them"}
	}
	alts := make([]Ref, len(types))
	for i, t := range types {
		r, err := c.ofType(s, t, path)
		if err != nil {
			return 0, err
		}
		alts[i] = r
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return b.Alt(path+"/type", alts...), nil
}

func (c *compiler) ofType(s *ordered, t, path string) (Ref, error) {
	b, j := c.b, c.b.json()
	switch t {
	case "object":
		return c.object(s, path)
	case "array":
		return c.array(s, path)
	case "string":
		lo, err := c.count(s, "minLength", path, 0)
		if err != nil {
			return 0, err
		}
		hi, err := c.count(s, "maxLength", path, -1)
		if err != nil {
			return 0, err
		}
		if hi >= 0 && hi < lo {
			return 0, &SchemaError{Path: path, Keyword: "maxLength", Msg: fmt.Sprintf("%d is below minLength %d", hi, lo)}
		}
		if lo == 0 && hi < 0 {
			return j.str, nil
		}
		return b.Seq(path+"/string", Lit(`"`), Str(lo, hi)), nil
	case "number":
		return j.num, nil
	case "integer":
		return j.integer, nil
	case "boolean":
		return j.boolean, nil
	case "null":
		return j.null, nil
	}
	return 0, &SchemaError{Path: path, Keyword: "type", Msg: fmt.Sprintf("unknown type %q (expected object, array, string, number, integer, boolean or null)", t)}
}

// count reads a non-negative integer keyword (def when absent).
func (c *compiler) count(s *ordered, key, path string, def int) (int, error) {
	v, ok := s.m[key]
	if !ok {
		return def, nil
	}
	n, isNum := v.(json.Number)
	i, err := strconv.Atoi(string(n))
	if !isNum || err != nil || i < 0 || i > 1<<20 {
		return 0, &SchemaError{Path: path, Keyword: key, Msg: fmt.Sprintf("expected an integer in [0, %d], got %s", 1<<20, marshalOrdered(v))}
	}
	return i, nil
}

// object generates the properties in the schema's order, each at most
// once, the required ones always; then, when additionalProperties allows
// them, other keys.
func (c *compiler) object(s *ordered, path string) (Ref, error) {
	b, j := c.b, c.b.json()
	ws := R(j.ws)
	var names []string
	var schemas []any
	if v, ok := s.m["properties"]; ok {
		props, ok := v.(*ordered)
		if !ok {
			return 0, &SchemaError{Path: path, Keyword: "properties", Msg: "expected an object of schemas"}
		}
		for _, k := range props.keys {
			names = append(names, k)
			schemas = append(schemas, props.m[k])
		}
	}
	required := map[string]bool{}
	if v, ok := s.m["required"]; ok {
		list, ok := v.([]any)
		if !ok {
			return 0, &SchemaError{Path: path, Keyword: "required", Msg: "expected an array of property names"}
		}
		for _, e := range list {
			name, ok := e.(string)
			if !ok {
				return 0, &SchemaError{Path: path, Keyword: "required", Msg: "expected an array of property names"}
			}
			if !required[name] && !contains(names, name) {
				names, schemas = append(names, name), append(schemas, true) // required, any value
			}
			required[name] = true
		}
	}
	var extra *Ref // the schema of other keys; nil: none
	switch v := s.m["additionalProperties"].(type) {
	case nil:
		if _, ok := s.m["additionalProperties"]; ok {
			return 0, &SchemaError{Path: path, Keyword: "additionalProperties", Msg: "expected a schema or a boolean"}
		}
		if len(names) == 0 {
			extra = &j.value
		}
	case bool:
		if v {
			extra = &j.value
		}
	default:
		r, err := c.compile(v, path+"/additionalProperties")
		if err != nil {
			return 0, err
		}
		extra = &r
	}
	n := len(names)
	kv := make([]Ref, n)
	for i, name := range names {
		p := path + "/properties/" + escapePointer(name)
		r, err := c.compile(schemas[i], p)
		if err != nil {
			return 0, err
		}
		kv[i] = b.Seq(p+"/kv", Lit(quote(name)), ws, Lit(":"), ws, R(r), ws)
	}
	// first[i]: members from property i on, none written yet; after[i]: the
	// same once one is written (each then starts with a comma).
	first, after := make([]Ref, n+1), make([]Ref, n+1)
	for i := range n + 1 {
		first[i], after[i] = b.Rule(fmt.Sprintf("%s{%d", path, i)), b.Rule(fmt.Sprintf("%s,%d", path, i))
	}
	if extra != nil {
		key := j.str
		if n > 0 {
			key = c.otherKey(names, path)
		}
		other := b.Seq(path+"/additional", R(key), ws, Lit(":"), ws, R(*extra), ws)
		b.Define(after[n], nil, []Sym{Lit(","), ws, R(other), R(after[n])})
		b.Define(first[n], nil, []Sym{R(other), R(after[n])})
	} else {
		b.Define(after[n], nil)
		b.Define(first[n], nil)
	}
	for i := n - 1; i >= 0; i-- {
		fa := [][]Sym{{R(kv[i]), R(after[i+1])}}
		aa := [][]Sym{{Lit(","), ws, R(kv[i]), R(after[i+1])}}
		if !required[names[i]] {
			fa = append(fa, []Sym{R(first[i+1])})
			aa = append(aa, []Sym{R(after[i+1])})
		}
		b.Define(first[i], fa...)
		b.Define(after[i], aa...)
	}
	return b.Seq(path+"/object", Lit("{"), ws, R(first[0]), Lit("}")), nil
}

// array generates prefixItems in order, then items, within minItems and
// maxItems.
func (c *compiler) array(s *ordered, path string) (Ref, error) {
	b, j := c.b, c.b.json()
	ws := R(j.ws)
	lo, err := c.count(s, "minItems", path, 0)
	if err != nil {
		return 0, err
	}
	hi, err := c.count(s, "maxItems", path, -1)
	if err != nil {
		return 0, err
	}
	if hi >= 0 && hi < lo {
		return 0, &SchemaError{Path: path, Keyword: "maxItems", Msg: fmt.Sprintf("%d is below minItems %d", hi, lo)}
	}
	// Each counted item is a rule: bounds past maxCounted would make a
	// grammar too large to build.
	for _, k := range []struct {
		name string
		v    int
	}{{"minItems", lo}, {"maxItems", hi}} {
		if k.v > maxCounted {
			return 0, &SchemaError{Path: path, Keyword: k.name, Msg: fmt.Sprintf("%d: at most %d is supported", k.v, maxCounted)}
		}
	}
	var prefix []Ref
	if v, ok := s.m["prefixItems"]; ok {
		list, ok := v.([]any)
		if !ok {
			return 0, &SchemaError{Path: path, Keyword: "prefixItems", Msg: "expected an array of schemas"}
		}
		for i, e := range list {
			r, err := c.compile(e, fmt.Sprintf("%s/prefixItems/%d", path, i))
			if err != nil {
				return 0, err
			}
			prefix = append(prefix, r)
		}
	}
	item, more := j.value, true
	switch v := s.m["items"].(type) {
	case nil:
		if _, ok := s.m["items"]; ok {
			return 0, &SchemaError{Path: path, Keyword: "items", Msg: "expected a schema or a boolean"}
		}
	case bool:
		more = v
	case []any:
		return 0, &SchemaError{Path: path, Keyword: "items", Msg: "an array of schemas is the old tuple form: use prefixItems"}
	default:
		if item, err = c.compile(v, path+"/items"); err != nil {
			return 0, err
		}
	}
	m := len(prefix)
	// The tail: items from index m on, within the bounds left.
	rlo, rhi := max(lo-m, 0), -1
	if hi >= 0 {
		rhi = max(hi-m, 0)
	}
	if !more {
		if rlo > 0 {
			return 0, &SchemaError{Path: path, Keyword: "minItems", Msg: fmt.Sprintf("%d items, but items is false after %d prefixItems", lo, m)}
		}
		rhi = 0
	}
	sepItem := b.Seq(path+"/,item", Lit(","), ws, R(item), ws)
	var tail Ref
	switch {
	case rhi == 0:
		tail = b.Seq(path + "/end")
	case m > 0:
		tail = b.Repeat(path+"/items", R(sepItem), rlo, rhi)
	default:
		restHi := -1
		if rhi > 0 {
			restHi = rhi - 1
		}
		body := b.Seq(path+"/items", R(item), ws, R(b.Repeat(path+"/items+", R(sepItem), max(rlo-1, 0), restHi)))
		if rlo == 0 {
			body = b.Opt(path+"/items?", R(body))
		}
		tail = body
	}
	// Prefix items, from the last: rest[i] holds items i… once i are written.
	rest := tail
	for i := m - 1; i >= 0; i-- {
		r := b.Rule(fmt.Sprintf("%s/prefixItems/%d+", path, i))
		var first []Sym
		if i > 0 {
			first = []Sym{Lit(","), ws}
		}
		alts := [][]Sym{append(first, R(prefix[i]), ws, R(rest))}
		switch {
		case hi >= 0 && i >= hi:
			alts = [][]Sym{nil}
		case i >= lo:
			alts = append(alts, nil)
		}
		b.Define(r, alts...)
		rest = r
	}
	return b.Seq(path+"/array", Lit("["), ws, R(rest), Lit("]")), nil
}

// ref compiles a local reference (#, #/$defs/x, any JSON pointer into the
// document) once; a recursive schema refers to the rule being defined.
func (c *compiler) ref(p, path string) (Ref, error) {
	if r, ok := c.refs[p]; ok {
		return r, nil
	}
	if !strings.HasPrefix(p, "#") {
		return 0, &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q: only references into the schema itself (#/…) are supported", p)}
	}
	target := c.root
	if rest := strings.TrimPrefix(p, "#"); rest != "" {
		if !strings.HasPrefix(rest, "/") {
			return 0, &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q: expected a JSON pointer (#/$defs/name)", p)}
		}
		for _, tok := range strings.Split(rest[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch t := target.(type) {
			case *ordered:
				v, ok := t.m[tok]
				if !ok {
					return 0, &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q: no %q in the schema", p, tok)}
				}
				target = v
			case []any:
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(t) {
					return 0, &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q: no item %q", p, tok)}
				}
				target = t[i]
			default:
				return 0, &SchemaError{Path: path, Keyword: "$ref", Msg: fmt.Sprintf("%q: %q is not inside an object or array", p, tok)}
			}
		}
	}
	r := c.b.Rule(p)
	c.refs[p] = r
	body, err := c.compile(target, p)
	if err != nil {
		return 0, err
	}
	c.b.Define(r, []Sym{R(body)})
	return r, nil
}

// otherKey is a rule for a JSON string (quotes included) that is none of
// names, so an additional property never repeats a declared one: a trie
// of the names' characters, leaving it by another character (then any
// rest) or ending where no name ends. It leaves the trie by a plain ASCII
// character, a UTF-8 one where no name has a non-ASCII or escaped
// character at that place, or an escape past the end of every name; so
// no spelling of a declared name (escapes included) gets through.
func (c *compiler) otherKey(names []string, path string) Ref {
	b := c.b
	type tnode struct {
		kids  map[string]*tnode
		order []string
		end   bool
	}
	root := &tnode{kids: map[string]*tnode{}}
	for _, name := range names {
		n := root
		q := quote(name)
		for _, u := range jsonChars(q[1 : len(q)-1]) {
			k, ok := n.kids[u]
			if !ok {
				k = &tnode{kids: map[string]*tnode{}}
				n.kids[u] = k
				n.order = append(n.order, u)
			}
			n = k
		}
		n.end = true
	}
	rest := Str(0, -1)
	var mk func(n *tnode, id string) Ref
	mk = func(n *tnode, id string) Ref {
		r := b.Rule(path + "/other-key" + id)
		var alts [][]Sym
		var ascii byteSet
		ascii.add(0x20, 0x7F)
		ascii[0] &^= 1 << '"'
		ascii['\\'>>6] &^= 1 << ('\\' & 63)
		plainOnly := true
		for i, u := range n.order {
			alts = append(alts, []Sym{Lit(u), R(mk(n.kids[u], fmt.Sprintf("%s.%d", id, i)))})
			if len(u) == 1 && u[0] < 0x80 {
				ascii[u[0]>>6] &^= 1 << (u[0] & 63)
			} else {
				plainOnly = false
			}
		}
		if ascii != (byteSet{}) {
			alts = append(alts, []Sym{{class: &ascii, kind: kByte}, rest})
		}
		if plainOnly {
			alts = append(alts, []Sym{R(c.utf8Char()), rest})
		}
		if len(n.order) == 0 {
			// Past every name: an escape is another character too.
			hex := Class('0', '9', 'a', 'f', 'A', 'F')
			alts = append(alts, []Sym{Lit(`\`), Class('"', '"', '\\', '\\', '/', '/', 'b', 'b', 'f', 'f', 'n', 'n', 'r', 'r', 't', 't'), rest},
				[]Sym{Lit(`\u`), hex, hex, hex, hex, rest})
		}
		if !n.end {
			alts = append(alts, []Sym{Lit(`"`)})
		}
		b.Define(r, alts...)
		return r
	}
	return b.Seq(path+"/other-key", Lit(`"`), R(mk(root, "")))
}

// jsonChars splits the body of a JSON string into its characters: escapes
// (\n, \uXXXX) and UTF-8 sequences whole.
func jsonChars(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		n := 1
		switch {
		case s[i] == '\\' && i+1 < len(s) && s[i+1] == 'u':
			n = 6
		case s[i] == '\\':
			n = 2
		default:
			_, n = utf8.DecodeRuneInString(s[i:])
		}
		n = min(n, len(s)-i)
		out = append(out, s[i:i+n])
		i += n
	}
	return out
}

// utf8Char is a rule for one non-ASCII UTF-8 character.
func (c *compiler) utf8Char() Ref {
	b := c.b
	if c.utf8 != nil {
		return *c.utf8
	}
	cont := Class(0x80, 0xBF)
	r := b.Rule("utf8-char")
	b.Define(r,
		[]Sym{Class(0xC2, 0xDF), cont},
		[]Sym{Lit("\xe0"), Class(0xA0, 0xBF), cont},
		[]Sym{Class(0xE1, 0xEC, 0xEE, 0xEF), cont, cont},
		[]Sym{Lit("\xed"), Class(0x80, 0x9F), cont},
		[]Sym{Lit("\xf0"), Class(0x90, 0xBF), cont, cont},
		[]Sym{Class(0xF1, 0xF3), cont, cont, cont},
		[]Sym{Lit("\xf4"), Class(0x80, 0x8F), cont, cont})
	c.utf8 = &r
	return r
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
