package grammar

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-llm/strata/internal/sharedrefs"
	"github.com/strata-llm/strata/runtime/text/tokenizer"
)

var qwen3 = sync.OnceValues(func() (*tokenizer.Tokenizer, error) {
	return tokenizer.Load(sharedrefs.Qwen3Tokenizer())
})

// vocabs are the Qwen3 vocabulary (151,669 ids) and a 248K one made from it
// by appending plausible merges (the bytes of two ordinary tokens), the size
// of the Qwen3.5 class.
var vocabs = sync.OnceValues(func() (map[string]*Vocab, error) {
	tok, err := qwen3()
	if err != nil {
		return nil, err
	}
	n := tok.Vocab()
	raw := make([][]byte, n, 248_320)
	for id := range n {
		if !tok.IsSpecial(id) {
			raw[id] = tok.TokenBytes(id)
		}
	}
	rng := rand.New(rand.NewSource(1))
	for len(raw) < cap(raw) {
		a, b := raw[rng.Intn(n)], raw[rng.Intn(n)]
		if len(a) == 0 || len(b) == 0 || len(a)+len(b) > 16 {
			continue
		}
		raw = append(raw, append(append([]byte(nil), a...), b...))
	}
	get := func(r [][]byte) func(int) []byte { return func(id int) []byte { return r[id] } }
	return map[string]*Vocab{
		"qwen3-151K": NewVocab(n, get(raw[:n]), nil),
		"248K":       NewVocab(len(raw), get(raw), nil),
	}, nil
})

func loadVocabs(tb testing.TB) map[string]*Vocab {
	v, err := vocabs()
	if err != nil {
		tb.Skip(err)
	}
	return v
}

// toolGrammar is a forced call of one function after an optional thinking
// block, as the server builds it for Qwen's template.
func toolGrammar(tb testing.TB) *Grammar {
	b := NewBuilder()
	args, err := b.Schema([]byte(`{"type": "object", "properties": {"city": {"type": "string"},
		"days": {"type": "integer"}, "units": {"enum": ["metric", "imperial"]}, "tags": {"type": "array", "items": {"type": "string"}}},
		"required": ["city", "days"]}`))
	if err != nil {
		tb.Fatal(err)
	}
	think := b.Opt("think", Lit("<think>"), Until("</think>"), R(b.WS()), R(b.WS()))
	g, err := b.Build(b.Seq("call", R(think), Lit("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "), R(args), Lit("}\n</tool_call>")))
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// states are prefixes of the tool grammar in the lexical states that cost
// differently: the start, a thinking block, a key, a string's body, a
// number, an array, and the end.
var states = []struct{ name, prefix string }{
	{"start", ""},
	{"think", "<think>Let me see."},
	{"key", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {"},
	{"string", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Par"},
	{"number", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 1"},
	{"array", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 1, \"tags\": ["},
	{"end", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call"},
	{"done", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>"},
}

// constraintAt is a constraint whose state is g's after prefix.
func constraintAt(tb testing.TB, g *Grammar, v *Vocab, prefix string, stops []int) *Constraint {
	c := NewConstraint(g, v, stops)
	c.st = c.st.AdvanceBytes([]byte(prefix))
	if c.st.Dead() {
		tb.Fatalf("the grammar refuses %q", prefix)
	}
	return c
}

// The mask is exactly the set of ids whose bytes the state accepts, one id
// at a time; the stop ids only when complete.
func TestMaskMatchesEachToken(t *testing.T) {
	vs := loadVocabs(t)
	v := vs["qwen3-151K"]
	g := toolGrammar(t)
	stop := 151645 // <|im_end|>, special: outside the tries
	more := []struct{ name, prefix string }{
		{"think-partial", "<think>a </thin"},
		{"string-utf8", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"\xe6\x97"},
		{"string-escape", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"a\\"},
		{"tag", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3, \"tags\": [\"x"},
	}
	type at struct {
		name, prefix string
		g            *Grammar
	}
	var all []at
	for _, s := range append(states[:len(states):len(states)], more...) {
		all = append(all, at{s.name, s.prefix, nil})
	}
	// Bounded strings: the room left decides which tokens fit.
	bounded := mustSchema(t, `{"type": "array", "items": {"type": "string", "minLength": 2, "maxLength": 5}}`)
	for _, p := range []string{`["`, `["ab`, `["abcd`, `["abcde`, "[\"ab\xe6\x97", `["abc\`, `["ab", "`} {
		all = append(all, at{"bounded " + p, p, bounded})
	}
	long := mustSchema(t, `{"type": "string", "maxLength": 100}`)
	all = append(all, at{"long", `"` + strings.Repeat("x", 70), long})
	for _, s := range all {
		gs := g
		if s.g != nil {
			gs = s.g
		}
		c := constraintAt(t, gs, v, s.prefix, []int{stop})
		mask := c.Mask()
		allowed := 0
		for id := range v.Size() + 64 {
			want := id < v.Size() && c.Allows(id)
			got := id < v.Size() && mask[id>>6]>>(id&63)&1 != 0
			if id >= v.Size() && id < len(mask)*64 && mask[id>>6]>>(id&63)&1 != 0 {
				t.Errorf("%s: id %d past the vocabulary allowed", s.name, id)
			}
			if got != want {
				t.Errorf("%s: id %d (%q): mask %v, alone %v", s.name, id, v.Bytes(id), got, want)
			}
			if got {
				allowed++
			}
		}
		if want := s.name == "done" && s.g == nil; (mask[stop>>6]>>(stop&63)&1 != 0) != want {
			t.Errorf("%s: the stop id allowed %v, want %v", s.name, !want, want)
		}
		t.Logf("%s: %d ids allowed", s.name, allowed)
		if allowed == 0 {
			t.Errorf("%s: nothing allowed", s.name)
		}
	}
}

// BenchmarkMask is the cost of one token's constraint at each state: the
// whole mask (the cache bypassed) and the check of one likely token that
// the check-first path does instead.
func BenchmarkMask(b *testing.B) {
	vs := loadVocabs(b)
	g := toolGrammar(b)
	likely := map[string]string{"start": "<tool_call>", "think": " I", "key": `"`, "string": "is",
		"number": "}", "array": `"`, "end": ">", "done": ""}
	for _, vname := range []string{"qwen3-151K", "248K"} {
		v := vs[vname]
		for _, s := range states {
			c := constraintAt(b, g, v, s.prefix, nil)
			mask := make([]uint64, words(v.Size()))
			c.compute(mask) // the vocabulary's fast path for this state, made once per vocabulary
			b.Run(fmt.Sprintf("%s/%s/full", vname, s.name), func(b *testing.B) {
				for b.Loop() {
					clear(mask)
					c.compute(mask)
				}
			})
			if s.name == "done" {
				continue
			}
			tok, ok := tokenOf(v, likely[s.name])
			if !ok {
				b.Fatalf("no token %q", likely[s.name])
			}
			b.Run(fmt.Sprintf("%s/%s/check", vname, s.name), func(b *testing.B) {
				for b.Loop() {
					if !c.Allows(tok) {
						b.Fatal("refused")
					}
				}
			})
		}
	}
}

func tokenOf(v *Vocab, s string) (int, bool) {
	for id := range v.Size() {
		if string(v.Bytes(id)) == s {
			return id, true
		}
	}
	return 0, false
}

// BenchmarkFastPath is the one-time cost of a lexical fast path (a string's
// body between characters), made on a vocabulary's first mask there.
func BenchmarkFastPath(b *testing.B) {
	vs := loadVocabs(b)
	for _, vname := range []string{"qwen3-151K", "248K"} {
		v := vs[vname]
		b.Run(vname, func(b *testing.B) {
			for b.Loop() {
				v.mu.Lock()
				clear(v.loops)
				v.mu.Unlock()
				v.loop(loopKey{kind: kStr})
			}
		})
	}
}

// One Vocab serves constraints on several goroutines (the server's
// requests): the masks are those made alone, and -race sees no conflict.
func TestVocabShared(t *testing.T) {
	src := loadVocabs(t)["qwen3-151K"]
	tok, _ := qwen3()
	v := NewVocab(src.Size(), src.Bytes, tok.IsSpecial) // fresh: its fast paths not made yet
	g := toolGrammar(t)
	want := make([][]uint64, len(states))
	for i, s := range states {
		want[i] = constraintAt(t, g, src, s.prefix, nil).Mask()
	}
	errs := make(chan string, len(states)*2)
	done := make(chan bool)
	for w := range 2 {
		go func() {
			for i := range states {
				s := states[(i+w)%len(states)]
				c := NewConstraint(g, v, nil)
				c.st = c.st.AdvanceBytes([]byte(s.prefix))
				got := c.Mask()
				if !slices.Equal(got, want[(i+w)%len(states)]) {
					errs <- s.name
				}
			}
			done <- true
		}()
	}
	<-done
	<-done
	close(errs)
	for name := range errs {
		t.Errorf("%s: the mask made alongside another differs", name)
	}
}
