package grammar

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// sentence walks g from its start, a random allowed byte at a time, leaning
// towards structural bytes so values close; ok is false when it did not
// finish within limit bytes.
func sentence(g *Grammar, rng *rand.Rand, limit int) (string, bool) {
	st := g.Start()
	var out []byte
	var allowed, closing []byte
	for len(out) < limit {
		if st.Final() || st.Complete() && rng.Intn(4) == 0 {
			return string(out), true
		}
		allowed, closing = allowed[:0], closing[:0]
		for c := range 256 {
			if !st.Advance(byte(c)).Dead() {
				allowed = append(allowed, byte(c))
				if strings.IndexByte(`"}],:0123456789tfn`, byte(c)) >= 0 {
					closing = append(closing, byte(c))
				}
			}
		}
		if len(allowed) == 0 {
			panic("a live state with no byte allowed: " + string(out))
		}
		c := allowed[rng.Intn(len(allowed))]
		if len(closing) > 0 && rng.Intn(3) > 0 {
			c = closing[rng.Intn(len(closing))]
		}
		out = append(out, c)
		st = st.Advance(c)
	}
	return string(out), false
}

// Random sentences of each schema's grammar pass an independent JSON
// Schema validator (santhosh-tekuri/jsonschema, draft 2020-12).
func TestSentencesValidate(t *testing.T) {
	schemas := []string{
		`{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"enum": ["x", "y", 3, null]},
			"c": {"type": "array", "items": {"type": "number"}, "minItems": 1, "maxItems": 2}}, "required": ["a", "b"]}`,
		`{"type": ["string", "null"], "minLength": 2, "maxLength": 3}`,
		`{"const": {"k": [1, "two", {"z": false}]}}`,
		`{"anyOf": [{"type": "integer"}, {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}]}`,
		`{"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}`,
		`{"type": "array", "prefixItems": [{"type": "boolean"}], "items": {"type": "null"}, "minItems": 2, "maxItems": 4}`,
		`{"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
			"kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"]}}, "$ref": "#/$defs/node"}`,
		`{"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string", "maxLength": 3}}}`,
		`{"type": "object", "properties": {"p": {"type": "boolean"}, "q": {"type": "null"}, "r": {"type": "number"}}, "additionalProperties": false}`,
		`{"type": "object"}`,
		`{"type": "object", "properties": {"p": {"type": "boolean"}, "pq": {"type": "null"}, "é": {"type": "integer"}}, "additionalProperties": {"type": "string", "maxLength": 2}}`,
		`{"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["id", "tags"]}, "minItems": 1}`,
		`{"oneOf": [{"type": "number"}, {"type": "boolean"}, {"type": "string", "maxLength": 0}]}`,
		`true`,
	}
	rng := rand.New(rand.NewSource(1))
	for _, src := range schemas {
		g := mustSchema(t, src)
		doc, err := jsonschema.UnmarshalJSON(strings.NewReader(src))
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("schema.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("schema.json")
		if err != nil {
			t.Fatal(err)
		}
		done := 0
		for range 300 {
			s, ok := sentence(g, rng, 400)
			if !ok {
				continue
			}
			done++
			v, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(s)))
			if err != nil {
				t.Errorf("%s: %q is not JSON: %v", src, s, err)
				continue
			}
			if err := sch.Validate(v); err != nil {
				t.Errorf("%s: %q fails the validator: %v", src, s, err)
			}
		}
		if done < 50 {
			t.Errorf("%s: only %d of 300 walks finished", src, done)
		}
	}
}
