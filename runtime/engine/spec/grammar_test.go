package spec_test

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/grammar"
	"github.com/strata-llm/strata/runtime/engine/sample"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/text/tokenizer"
)

// Under a grammar, speculation changes nothing: tiny-go (trained MTP head)
// writes the same tokens with and without drafts (MTP and suffix drafts,
// fixed depths and the gate), greedy and sampled, and every output is a
// whole sentence of the grammar that parses as JSON with the schema's
// shape (checked by hand below, not by the grammar).
func TestGrammarWithSpeculation(t *testing.T) {
	l, err := load.HF(e2e.TinyGoDir(), e2e.WithGenerator(load.Options{PrefillRows: 16}))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	tok, err := tokenizer.Load(filepath.Join(e2e.TinyGoDir(), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	vocab := grammar.NewVocab(tok.Vocab(), tok.TokenBytes, tok.IsSpecial)
	g, err := grammar.FromSchema([]byte(`{"type": "object", "properties": {
		"name": {"type": "string", "maxLength": 12},
		"id": {"type": "integer"},
		"ok": {"type": "boolean"},
		"tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxItems": 3}},
		"required": ["name", "id", "ok", "tags"]}`))
	if err != nil {
		t.Fatal(err)
	}
	prompt := tok.Encode("// config\nvar defaults = `")
	eos := []int{0, 2}
	gen := func(p sample.Params, sp engine.SpecOptions) ([]int, *grammar.Constraint) {
		c := grammar.NewConstraint(g, vocab, eos)
		out, err := l.Model.NewSession().Generate(prompt, 200, engine.GenerateOptions{
			PrefillRows: l.PrefillRows, Sampling: p, EOS: eos, Constraint: c, Spec: sp})
		if err != nil {
			t.Fatal(err)
		}
		return out, c
	}
	params := []sample.Params{{}, {Temperature: 1, Seed: 7}, {Temperature: 0.8, TopK: 20, TopP: 0.9, Seed: 3}}
	specs := []engine.SpecOptions{{Depth: 1, MTP: true}, {Depth: 3, MTP: true}, {Depth: 2, SuffixDraft: 3},
		{Depth: engine.Auto, MTP: true, SuffixDraft: 3}}
	if raceEnabled { // 54 s under the race detector: one sampled chain, a fixed depth and the gate
		params, specs = params[1:2], []engine.SpecOptions{specs[1], specs[3]}
	}
	for _, p := range params {
		want, c := gen(p, engine.SpecOptions{})
		text := tok.Decode(want)
		if !c.Finished() {
			t.Fatalf("%+v: the grammar is not finished after %q", p, text)
		}
		var v struct {
			Name *string  `json:"name"`
			ID   *int64   `json:"id"`
			OK   *bool    `json:"ok"`
			Tags []string `json:"tags"`
		}
		d := json.NewDecoder(strings.NewReader(text))
		d.DisallowUnknownFields()
		if err := d.Decode(&v); err != nil || d.More() || v.Name == nil || v.ID == nil || v.OK == nil || v.Tags == nil ||
			len([]rune(*v.Name)) > 12 || len(v.Tags) > 3 {
			t.Fatalf("%+v: %q does not parse with the schema (%v)", p, text, err)
		}
		t.Logf("%+v: %q", p, text)
		drafted := 0
		for _, sp := range specs {
			st := &engine.SpecStats{}
			sp.Stats = st
			got, _ := gen(p, sp)
			if !slices.Equal(got, want) {
				t.Fatalf("%+v, depth %d mtp %v: %q, without drafts %q", p, sp.Depth, sp.MTP, tok.Decode(got), text)
			}
			drafted += st.Drafted
			t.Logf("depth %d mtp %v suffix %d: %d windows, %d drafted, %d accepted", sp.Depth, sp.MTP, sp.SuffixDraft, st.Windows, st.Drafted, st.Accepted)
		}
		if drafted == 0 {
			t.Errorf("%+v: no draft was fed", p)
		}
	}
}
