package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/grammar"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/text/tokenizer"
)

// grammarFlags are strata run's constrained-output flags (llama-cli's
// --json-schema, --grammar and --grammar-file; --json for any object, as
// the API's json_object).
type grammarFlags struct {
	json                   *bool
	schema, gbnf, gbnfFile *string
}

func addGrammarFlags(fs *flag.FlagSet) *grammarFlags {
	return &grammarFlags{
		json: fs.Bool("json", false, "constrain the output to one JSON object (docs/sampling.md: whitespace policy)"),
		schema: fs.String("json-schema", "", "constrain the output to the values of a JSON Schema: a `file`, or the schema itself "+
			"(text starting with { or true); unsupported keywords are refused by name"),
		gbnf:     fs.String("grammar", "", "constrain the output to a llama.cpp GBNF `grammar` (its rule root)"),
		gbnfFile: fs.String("grammar-file", "", "constrain the output to the GBNF grammar in this `file`"),
	}
}

// grammar is the grammar the flags ask for (nil: none), checked before
// anything is loaded.
func (f *grammarFlags) grammar() (*grammar.Grammar, error) {
	src := strings.TrimSpace(*f.schema)
	var given []string
	for _, g := range []struct {
		name string
		set  bool
	}{{"--json", *f.json}, {"--json-schema", src != ""}, {"--grammar", *f.gbnf != ""}, {"--grammar-file", *f.gbnfFile != ""}} {
		if g.set {
			given = append(given, g.name)
		}
	}
	if len(given) > 1 {
		return nil, usagef("%s: give one (they each constrain the whole output)", strings.Join(given, " and "))
	}
	switch {
	case *f.json:
		return grammar.JSONObject(), nil
	case *f.gbnf != "" || *f.gbnfFile != "":
		text, flagName := *f.gbnf, "--grammar"
		if *f.gbnfFile != "" {
			data, err := os.ReadFile(*f.gbnfFile)
			if err != nil {
				return nil, usagef("--grammar-file: %v", err)
			}
			text, flagName = string(data), "--grammar-file"
		}
		g, err := grammar.FromGBNF(text)
		if err != nil {
			return nil, usagef("%s: %v", flagName, err)
		}
		return g, nil
	case src == "":
		return nil, nil
	}
	data := []byte(src)
	if !strings.HasPrefix(src, "{") && src != "true" {
		var err error
		if data, err = os.ReadFile(src); err != nil {
			return nil, usagef("--json-schema %s: expected a schema file or the schema itself: %v", src, err)
		}
	}
	g, err := grammar.FromSchema(data)
	if err != nil {
		return nil, usagef("--json-schema: %v", err)
	}
	return g, nil
}

// constraints makes a fresh constraint of g over tok for each generation
// (a chat's every reply).
func constraints(g *grammar.Grammar, tok *tokenizer.Tokenizer, stops []int) (func() sample.Constraint, error) {
	if tok == nil {
		return nil, fmt.Errorf("--json, --json-schema and --grammar need the model's tokenizer (the token bytes the grammar checks)")
	}
	v := grammar.NewVocab(tok.Vocab(), tok.TokenBytes, tok.IsSpecial)
	return func() sample.Constraint { return grammar.NewConstraint(g, v, stops) }, nil
}

// constrain sets gopt's constraint (a chat makes a fresh one each reply)
// from the text run's tokenizer, or the default model's.
func constrain(g *grammar.Grammar, txt *textRun, defaultModel bool, gopt *engine.GenerateOptions) error {
	var tok *tokenizer.Tokenizer
	stops := gopt.EOS
	switch {
	case txt != nil:
		tok = txt.tm.Tok
		stops = append(slices.Clone(stops), txt.tm.StopIDs()...)
	case defaultModel:
		tm, err := defaultText()
		if err != nil {
			return err
		}
		tok = tm.Tok
	}
	mk, err := constraints(g, tok, stops)
	if err != nil {
		return usagef("%v", err)
	}
	gopt.Constraint = mk()
	if txt != nil {
		txt.newConstraint = mk
	}
	return nil
}
