package tokenizer

import (
	"fmt"
	"strings"

	"github.com/strata-llm/strata/runtime/format/gguf"
)

// FromGGUF builds the tokenizer llama.cpp would read from a GGUF's
// tokenizer.ggml.* metadata. Only the byte-level BPE model ("gpt2") with the
// Qwen2 pre-tokenizer ("qwen2") is supported; NFC applies as in Qwen's
// tokenizer.json. Control and user-defined tokens become added tokens (special
// for control ones); unused padding tokens keep their ids and decode to nothing.
func FromGGUF(v *gguf.Vocab) (*Tokenizer, error) {
	if v.Model != "gpt2" {
		return nil, fmt.Errorf("%s %q is not supported (only \"gpt2\", byte-level BPE)", gguf.KeyTokenizerModel, v.Model)
	}
	if v.Pre != "qwen2" {
		return nil, fmt.Errorf("%s %q is not supported (only \"qwen2\")", gguf.KeyTokenizerPre, v.Pre)
	}
	if v.Types != nil && len(v.Types) != len(v.Tokens) {
		return nil, fmt.Errorf("%s has %d entries for %d tokens", gguf.KeyTokenType, len(v.Types), len(v.Tokens))
	}
	t := &Tokenizer{vocab: make(map[string]int32, len(v.Tokens)), unk: -1, normalize: true}
	for id, s := range v.Tokens {
		typ := gguf.TokenNormal
		if v.Types != nil {
			typ = gguf.TokenType(v.Types[id])
		}
		switch typ {
		case gguf.TokenNormal, gguf.TokenByte:
			t.vocab[s] = int32(id)
		case gguf.TokenControl, gguf.TokenUserDefined:
			t.added = append(t.added, addedToken{content: s, id: int32(id), special: typ == gguf.TokenControl})
		case gguf.TokenUnused:
			// a hole: never produced
		default:
			return nil, fmt.Errorf("%s[%d] = %d (token %q) is not a type this tokenizer knows", gguf.KeyTokenType, id, typ, s)
		}
	}
	t.ranked = make([][2]string, 0, len(v.Merges))
	for i, m := range v.Merges {
		// llama.cpp splits at the first space after the first character.
		k := strings.IndexByte(m[min(1, len(m)):], ' ')
		if k < 0 {
			return nil, fmt.Errorf("%s[%d] %q: want \"left right\"", gguf.KeyMerges, i, m)
		}
		k += min(1, len(m))
		t.ranked = append(t.ranked, [2]string{m[:k], m[k+1:]})
	}
	if err := t.build(); err != nil {
		return nil, err
	}
	for len(t.tokens) < len(v.Tokens) { // trailing holes keep their ids
		t.tokens = append(t.tokens, "")
		t.raw = append(t.raw, nil)
	}
	for id, s := range v.Tokens { // holes keep their name, but decode to nothing, as HF skips unknown ids
		if t.tokens[id] == "" {
			t.tokens[id] = s
		}
	}
	return t, nil
}

// GGUFVocab is the tokenizer as convert_hf_to_gguf writes it: rows tokens (the
// embedding's rows; ids the tokenizer lacks become "[PAD<id>]" of type unused),
// control type for special added tokens and for those that look special
// (<|...|>), user-defined for the other added tokens, merges as "left right".
// The caller fills in the special ids and the chat template.
func (t *Tokenizer) GGUFVocab(rows int) (*gguf.Vocab, error) {
	if rows == 0 {
		rows = t.Vocab()
	}
	if rows < t.Vocab() {
		return nil, fmt.Errorf("the tokenizer has %d tokens but the model only %d embedding rows", t.Vocab(), rows)
	}
	v := &gguf.Vocab{Model: "gpt2", Pre: "qwen2", Tokens: make([]string, rows), Types: make([]int32, rows),
		BOS: -1, EOS: -1, EOT: -1, PAD: -1}
	special := map[int32]bool{}
	for _, a := range t.added {
		special[a.id] = a.special
	}
	for id := range rows {
		s := ""
		if id < len(t.tokens) {
			s = t.tokens[id]
		}
		sp, added := special[int32(id)]
		switch {
		case added && (sp || looksSpecial(s)):
			v.Types[id] = int32(gguf.TokenControl)
		case added:
			v.Types[id] = int32(gguf.TokenUserDefined)
		case s == "":
			s = fmt.Sprintf("[PAD%d]", id)
			v.Types[id] = int32(gguf.TokenUnused)
		default:
			v.Types[id] = int32(gguf.TokenNormal)
		}
		v.Tokens[id] = s
	}
	v.Merges = make([]string, len(t.ranked))
	for i, m := range t.ranked {
		v.Merges[i] = m[0] + " " + m[1]
	}
	return v, nil
}

// looksSpecial is convert_hf_to_gguf's rule for added tokens that are control
// tokens even when not marked special.
func looksSpecial(s string) bool {
	return (strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) ||
		(strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>")) ||
		(strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")) ||
		s == "<pad>" || s == "<mask>" || s == "<2mass>" || s == "[@BOS@]"
}
