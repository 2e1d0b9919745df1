package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// strata run --json-schema: the default model's continuation is a value of
// the schema (decoded strictly, bounds checked by hand), the same with
// drafts, from a file or inline; --json gives an object.
func TestRunJSONSchema(t *testing.T) {
	schema := `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}},
		"required": ["name", "n"], "additionalProperties": false}`
	file := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(file, []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	prompt, _, _ := runStrata(t, "run", "-n", "0")
	prompt = strings.TrimSuffix(prompt, "\n")
	var want string
	for i, args := range [][]string{
		{"--json-schema", schema},
		{"--json-schema", file},
		{"--json-schema", file, "--spec", "2"},
	} {
		out, errText, status := runStrata(t, append([]string{"run", "-n", "100"}, args...)...)
		if status != 0 {
			t.Fatalf("%v: status %d: %s", args, status, errText)
		}
		reply, ok := strings.CutPrefix(strings.TrimSuffix(out, "\n"), prompt)
		if !ok {
			t.Fatalf("%v: %q does not start with the prompt %q", args, out, prompt)
		}
		var v struct {
			Name *string `json:"name"`
			N    *int64  `json:"n"`
		}
		d := json.NewDecoder(strings.NewReader(reply))
		d.DisallowUnknownFields()
		if err := d.Decode(&v); err != nil || d.More() || v.Name == nil || v.N == nil || len([]rune(*v.Name)) > 8 {
			t.Fatalf("%v: %q is not a value of the schema (%v)", args, reply, err)
		}
		if i == 0 {
			want = reply
		} else if reply != want {
			t.Errorf("%v: %q, want %q", args, reply, want)
		}
	}
	// A GBNF grammar: the reply is what it allows.
	out, _, status := runStrata(t, "run", "-n", "40", "--grammar", `root ::= "// " [a-z ]{3,12} "."`)
	if reply, _ := strings.CutPrefix(out, prompt); status != 0 || !regexp.MustCompile(`^// [a-z ]{3,12}\.\n?$`).MatchString(reply) {
		t.Errorf("--grammar: status %d, reply %q", status, reply)
	}
	out, _, status = runStrata(t, "run", "-n", "40", "--json", "--temperature", "1")
	reply, _ := strings.CutPrefix(out, prompt)
	if status != 0 || !strings.HasPrefix(reply, "{") {
		t.Errorf("--json: status %d, reply %q", status, reply)
	}
}

func TestGrammarFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--json", "--json-schema", "{}"}, "--json and --json-schema: give one"},
		{[]string{"--grammar", `root ::= "a"`, "--json"}, "--json and --grammar: give one"},
		{[]string{"--grammar", `root ::= x`}, `--grammar: gbnf: line 1, column 10: rule "x" is used but not defined`},
		{[]string{"--grammar-file", "no-such.gbnf"}, "--grammar-file: open no-such.gbnf"},
		{[]string{"--json-schema", `{"type": "string", "pattern": "a"}`}, `keyword "pattern"`},
		{[]string{"--json-schema", "no-such-file.json"}, "--json-schema no-such-file.json"},
		{[]string{"--hf", tinyA, "--tokens", "1", "--json"}, "need the model's tokenizer"},
	} {
		_, errText, status := runStrata(t, append([]string{"run"}, c.args...)...)
		if status != 2 || !strings.Contains(errText, c.want) {
			t.Errorf("%v: status %d, stderr %q, want 2 and %q", c.args, status, errText, c.want)
		}
	}
}
