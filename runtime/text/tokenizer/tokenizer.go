// Package tokenizer is the byte-level BPE tokenizer of HF tokenizer.json files
// as Qwen2/Qwen3 ship them (and GGUF's "gpt2" tokenizer model): NFC
// normalization, the Qwen Split pre-tokenizer, the GPT-2 byte-level alphabet,
// merges by rank and added tokens matched whole anywhere in the text. Options
// it does not implement are refused by name when the file is loaded.
package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer encodes text to token ids and back. It is safe for concurrent use.
type Tokenizer struct {
	vocab  map[string]int32 // byte-level token string -> id
	tokens []string         // id -> token string ("" for holes)
	raw    [][]byte         // id -> the bytes the token decodes to
	merges map[uint64]merge
	ranked [][2]string // merges in rank order, for GGUF

	byteTok [256]int32 // id of each single-byte token, -1 if absent

	added         []addedToken
	addedByFirst  [2][256][]int // indexes into added by normalized flag and first byte, longest first
	anyNormalized bool          // some added token is matched after normalization
	addedID       map[string]int32
	special       map[int32]bool // added tokens marked special
	normalize     bool           // NFC
	ignoreMerges  bool
	byteFallback  bool
	unk           int32 // -1: none

	mu    sync.RWMutex
	cache map[string][]int32
}

type addedToken struct {
	content    string
	id         int32
	special    bool
	normalized bool
}

// Added is an added token: its id, text and whether it is special (control).
type Added struct {
	ID      int
	Content string
	Special bool
}

const (
	cacheMaxWord    = 256
	cacheMaxEntries = 1 << 16
)

// Encode tokenizes text without adding any special tokens (HF
// encode(text, add_special_tokens=False)). Added tokens written in the text are
// matched whole wherever they occur.
func (t *Tokenizer) Encode(text string) []int { return t.encode(text, nil) }

// encode is Encode; literal, when set, turns each piece of text between
// added tokens into the text to tokenize (EncodeEscaped's marks).
func (t *Tokenizer) encode(text string, literal func(string) string) []int {
	var out []int
	var ends []int
	var syms []int32
	plain := func(seg string) {
		if literal != nil {
			seg = literal(seg)
		}
		t.encodeText(seg, &out, &ends, &syms)
	}
	t.splitAdded(text, false, func(seg string, id int32) {
		if id >= 0 {
			out = append(out, int(id))
			return
		}
		if t.normalize && !norm.NFC.IsNormalString(seg) {
			seg = norm.NFC.String(seg)
		}
		if !t.anyNormalized {
			plain(seg)
			return
		}
		t.splitAdded(seg, true, func(seg string, id int32) {
			if id >= 0 {
				out = append(out, int(id))
				return
			}
			plain(seg)
		})
	})
	return out
}

// encodeText appends the tokens of normalized text with no added tokens in it.
func (t *Tokenizer) encodeText(seg string, out, ends *[]int, syms *[]int32) {
	*ends = splitQwen(seg, (*ends)[:0])
	start := 0
	for _, end := range *ends {
		word := seg[start:end]
		start = end
		*syms = t.encodeWord(word, (*syms)[:0])
		for _, s := range *syms {
			*out = append(*out, int(s))
		}
	}
}

// encodeWord appends the tokens of one pre-tokenized piece.
func (t *Tokenizer) encodeWord(word string, dst []int32) []int32 {
	if len(word) == 1 { // a lone byte is its own token: no cache, no lock
		if id := t.byteTok[word[0]]; id >= 0 {
			return append(dst, id)
		}
	}
	cacheable := len(word) <= cacheMaxWord
	if cacheable {
		t.mu.RLock()
		ids, ok := t.cache[word]
		t.mu.RUnlock()
		if ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	if id, ok := t.wholeWord(word); ok {
		dst = append(dst, id)
	} else {
		for i := 0; i < len(word); i++ {
			if id := t.byteTok[word[i]]; id >= 0 {
				dst = append(dst, id)
			} else if t.byteFallback {
				// HF falls back on the UTF-8 bytes of the word's character,
				// which here is the byte's byte-level rune.
				var ch [utf8.UTFMax]byte
				n := utf8.EncodeRune(ch[:], byteToRune[word[i]])
				fb := make([]int32, 0, n)
				for _, c := range ch[:n] {
					if id, ok := t.vocab[fmt.Sprintf("<0x%02X>", c)]; ok {
						fb = append(fb, id)
					}
				}
				switch {
				case len(fb) == n:
					dst = append(dst, fb...)
				case t.unk >= 0:
					dst = append(dst, t.unk)
				}
			} else if t.unk >= 0 {
				dst = append(dst, t.unk)
			}
		}
		merged := t.bpe(dst[start:])
		dst = dst[:start+len(merged)]
	}
	if cacheable {
		ids := append([]int32(nil), dst[start:]...)
		t.mu.Lock()
		if len(t.cache) < cacheMaxEntries {
			t.cache[word] = ids
		}
		t.mu.Unlock()
	}
	return dst
}

// wholeWord is the ignore_merges rule: a word that is itself a token is that
// token.
func (t *Tokenizer) wholeWord(word string) (int32, bool) {
	if !t.ignoreMerges {
		return 0, false
	}
	id, ok := t.vocab[byteLevelEncode([]byte(word))]
	return id, ok
}

// splitAdded cuts s at the added tokens whose "normalized" flag equals
// normalized, leftmost-longest, and calls f for each piece: id >= 0 for an added
// token, -1 for the text between.
func (t *Tokenizer) splitAdded(s string, normalized bool, f func(string, int32)) {
	table := &t.addedByFirst[0]
	if normalized {
		table = &t.addedByFirst[1]
	}
	start := 0
	for i := 0; i < len(s); {
		best := -1
		for _, k := range table[s[i]] {
			if strings.HasPrefix(s[i:], t.added[k].content) {
				best = k
				break // longest first
			}
		}
		if best < 0 {
			i++
			continue
		}
		if start < i {
			f(s[start:i], -1)
		}
		f(t.added[best].content, t.added[best].id)
		i += len(t.added[best].content)
		start = i
	}
	if start < len(s) {
		f(s[start:], -1)
	}
}

// Decode turns ids back into text as HF decode(ids, skip_special_tokens=False)
// does: special tokens as their content, ill-formed UTF-8 as U+FFFD. Ids out of
// range are skipped.
func (t *Tokenizer) Decode(ids []int) string {
	var b []byte
	for _, id := range ids {
		b = append(b, t.TokenBytes(id)...)
	}
	return string(appendLossy(nil, b))
}

// TokenBytes is the raw bytes of one token (a special token's content); nil for
// an id out of range. The bytes of a token need not be valid UTF-8 alone.
func (t *Tokenizer) TokenBytes(id int) []byte {
	if id < 0 || id >= len(t.raw) {
		return nil
	}
	return t.raw[id]
}

// TokenID looks a token up by its text: an added token's content (such as
// "<|im_end|>") or a vocabulary entry in its byte-level form.
func (t *Tokenizer) TokenID(s string) (int, bool) {
	if id, ok := t.addedID[s]; ok {
		return int(id), true
	}
	id, ok := t.vocab[s]
	return int(id), ok
}

// Vocab is the number of token ids (one more than the largest id).
func (t *Tokenizer) Vocab() int { return len(t.tokens) }

// IsSpecial reports whether id is a special (control) added token.
func (t *Tokenizer) IsSpecial(id int) bool { return t.special[int32(id)] }

// AddedTokens lists the added tokens by id.
func (t *Tokenizer) AddedTokens() []Added {
	out := make([]Added, 0, len(t.added))
	for _, a := range t.added {
		out = append(out, Added{int(a.id), a.content, a.special})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// build fills the derived tables once vocab, merges and added tokens are set.
func (t *Tokenizer) build() error {
	n := 0
	for _, id := range t.vocab {
		n = max(n, int(id)+1)
	}
	for _, a := range t.added {
		n = max(n, int(a.id)+1)
	}
	t.tokens = make([]string, n)
	for s, id := range t.vocab {
		t.tokens[id] = s
	}
	t.addedID = map[string]int32{}
	t.special = map[int32]bool{}
	for _, a := range t.added {
		t.tokens[a.id] = a.content
		t.addedID[a.content] = a.id
		if a.special {
			t.special[a.id] = true
		}
	}
	t.raw = make([][]byte, n)
	for id, s := range t.tokens {
		t.raw[id] = byteLevelDecode(s)
	}
	for b := range t.byteTok {
		t.byteTok[b] = -1
		if id, ok := t.vocab[string(byteToRune[b])]; ok {
			t.byteTok[b] = id
		}
	}
	t.merges = make(map[uint64]merge, len(t.ranked))
	for rank, m := range t.ranked {
		a, okA := t.vocab[m[0]]
		b, okB := t.vocab[m[1]]
		c, okC := t.vocab[m[0]+m[1]]
		if !okA || !okB || !okC {
			return fmt.Errorf("merge %d %q %q: token not in the vocabulary", rank, m[0], m[1])
		}
		if _, dup := t.merges[pairKey(a, b)]; !dup {
			t.merges[pairKey(a, b)] = merge{int32(rank), c}
		}
	}
	idx := make([]int, len(t.added))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(i, j int) bool { return len(t.added[idx[i]].content) > len(t.added[idx[j]].content) })
	for _, k := range idx {
		a := t.added[k]
		if a.content == "" {
			continue
		}
		n := 0
		if a.normalized {
			n, t.anyNormalized = 1, true
		}
		t.addedByFirst[n][a.content[0]] = append(t.addedByFirst[n][a.content[0]], k)
	}
	t.cache = map[string][]int32{}
	return nil
}
