package gguf

import "fmt"

// Tokenizer metadata keys, as llama.cpp names them (gguf-py constants.py
// Keys.Tokenizer; read by llama-vocab.cpp).
const (
	KeyTokenizerModel = "tokenizer.ggml.model"        // string: "gpt2" for byte-level BPE
	KeyTokenizerPre   = "tokenizer.ggml.pre"          // string: pre-tokenizer, "qwen2"
	KeyTokens         = "tokenizer.ggml.tokens"       // [string], id order
	KeyTokenType      = "tokenizer.ggml.token_type"   // [int32], TokenType per token
	KeyMerges         = "tokenizer.ggml.merges"       // [string] "left right", rank order
	KeyBOSID          = "tokenizer.ggml.bos_token_id" // uint32
	KeyEOSID          = "tokenizer.ggml.eos_token_id" // uint32
	KeyEOTID          = "tokenizer.ggml.eot_token_id" // uint32
	KeyEOMID          = "tokenizer.ggml.eom_token_id" // uint32
	KeyPadID          = "tokenizer.ggml.padding_token_id"
	KeyUnkID          = "tokenizer.ggml.unknown_token_id"
	KeyAddBOS         = "tokenizer.ggml.add_bos_token" // bool
	KeyAddEOS         = "tokenizer.ggml.add_eos_token" // bool
	KeyChatTemplate   = "tokenizer.chat_template"      // string (Jinja)
	// KeyEOSIDs is strata's: every id that ends generation
	// (generation_config.json eos_token_id may list several; llama.cpp's single
	// eos id holds one of them).
	KeyEOSIDs = "strata.eos_token_ids" // [int32]
)

// TokenType is llama.cpp's llama_token_type / gguf-py TokenType.
type TokenType int32

// The token types.
const (
	TokenNormal      TokenType = 1
	TokenUnknown     TokenType = 2
	TokenControl     TokenType = 3 // special tokens: <|im_start|>, <|endoftext|>
	TokenUserDefined TokenType = 4 // added tokens that are not special: <think>
	TokenUnused      TokenType = 5 // padding up to the embedding's rows: [PAD151669]
	TokenByte        TokenType = 6
)

// Vocab is a tokenizer as GGUF stores it. Ids are -1 when absent.
type Vocab struct {
	Model, Pre   string
	Tokens       []string
	Types        []int32
	Merges       []string
	BOS, EOS     int
	EOT, PAD     int
	EOSIDs       []int
	AddBOS       bool
	ChatTemplate string
}

// Metadata is the vocabulary's key/value pairs in llama.cpp's types.
func (v *Vocab) Metadata() []KV {
	kv := []KV{
		{KeyTokenizerModel, v.Model},
		{KeyTokenizerPre, v.Pre},
		{KeyTokens, Array{TypeString, v.Tokens}},
		{KeyTokenType, Array{TypeInt32, v.Types}},
		{KeyMerges, Array{TypeString, v.Merges}},
	}
	for _, id := range []struct {
		key string
		id  int
	}{{KeyBOSID, v.BOS}, {KeyEOSID, v.EOS}, {KeyEOTID, v.EOT}, {KeyPadID, v.PAD}} {
		if id.id >= 0 {
			kv = append(kv, KV{id.key, uint32(id.id)})
		}
	}
	kv = append(kv, KV{KeyAddBOS, v.AddBOS})
	if len(v.EOSIDs) > 0 {
		ids := make([]int32, len(v.EOSIDs))
		for i, id := range v.EOSIDs {
			ids[i] = int32(id)
		}
		kv = append(kv, KV{KeyEOSIDs, Array{TypeInt32, ids}})
	}
	if v.ChatTemplate != "" {
		kv = append(kv, KV{KeyChatTemplate, v.ChatTemplate})
	}
	return kv
}

// VocabOf reads the tokenizer metadata of f; nil, nil when the file has none
// (no tokenizer.ggml.model).
func VocabOf(f *File) (*Vocab, error) {
	if !f.has(KeyTokenizerModel) {
		return nil, nil
	}
	v := &Vocab{BOS: -1, EOS: -1, EOT: -1, PAD: -1}
	var err error
	if v.Model, err = f.String(KeyTokenizerModel); err != nil {
		return nil, err
	}
	if f.has(KeyTokenizerPre) {
		if v.Pre, err = f.String(KeyTokenizerPre); err != nil {
			return nil, err
		}
	}
	if v.Tokens, err = f.strings(KeyTokens); err != nil {
		return nil, err
	}
	if f.has(KeyMerges) {
		if v.Merges, err = f.strings(KeyMerges); err != nil {
			return nil, err
		}
	}
	if f.has(KeyTokenType) {
		types, err := f.Ints(KeyTokenType)
		if err != nil {
			return nil, err
		}
		if len(types) != len(v.Tokens) {
			return nil, fmt.Errorf("gguf %s: %s has %d entries for %d tokens", f.Path, KeyTokenType, len(types), len(v.Tokens))
		}
		v.Types = make([]int32, len(types))
		for i, t := range types {
			v.Types[i] = int32(t)
		}
	}
	for _, id := range []struct {
		key string
		dst *int
	}{{KeyBOSID, &v.BOS}, {KeyEOSID, &v.EOS}, {KeyEOTID, &v.EOT}, {KeyPadID, &v.PAD}} {
		if !f.has(id.key) {
			continue
		}
		u, err := f.Uint(id.key)
		if err != nil {
			return nil, err
		}
		if u >= uint64(len(v.Tokens)) {
			return nil, fmt.Errorf("gguf %s: %s = %d, but there are %d tokens", f.Path, id.key, u, len(v.Tokens))
		}
		*id.dst = int(u)
	}
	if f.has(KeyAddBOS) {
		if v.AddBOS, err = f.Bool(KeyAddBOS); err != nil {
			return nil, err
		}
	}
	if f.has(KeyEOSIDs) {
		ids, err := f.Ints(KeyEOSIDs)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			if id < 0 || id >= int64(len(v.Tokens)) {
				return nil, fmt.Errorf("gguf %s: %s holds %d, but there are %d tokens", f.Path, KeyEOSIDs, id, len(v.Tokens))
			}
			v.EOSIDs = append(v.EOSIDs, int(id))
		}
	}
	if f.has(KeyChatTemplate) {
		if v.ChatTemplate, err = f.String(KeyChatTemplate); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// strings reads an array of strings.
func (f *File) strings(key string) ([]string, error) {
	a, err := f.Array(key)
	if err != nil {
		return nil, err
	}
	s, ok := a.Values.([]string)
	if !ok {
		return nil, fmt.Errorf("gguf %s: metadata key %s is an array of %s, want strings", f.Path, key, a.Elem)
	}
	return s, nil
}

// KeyScores is an SPM vocabulary's per-token scores ([float32]).
const KeyScores = "tokenizer.ggml.scores"

// PlaceholderVocab is a vocabulary of n tokens that carries no tokenizer:
// SentencePiece-style (llama.cpp's "llama" model) with <unk>, <s>, </s>,
// the 256 byte tokens and then tokens named by their id, so a file of
// random weights (strata synth) loads in llama.cpp, which refuses a GGUF
// without a vocabulary as wide as its embedding. Token ids mean nothing;
// benchmarks feed ids, not text.
func PlaceholderVocab(n int) ([]KV, error) {
	const special = 3 + 256
	if n < special {
		return nil, fmt.Errorf("a placeholder vocabulary of %d tokens: needs at least %d (<unk>, <s>, </s> and 256 bytes)", n, special)
	}
	tokens := make([]string, n)
	scores := make([]float32, n)
	types := make([]int32, n)
	tokens[0], tokens[1], tokens[2] = "<unk>", "<s>", "</s>"
	types[0], types[1], types[2] = int32(TokenUnknown), int32(TokenControl), int32(TokenControl)
	for b := range 256 {
		tokens[3+b], types[3+b] = fmt.Sprintf("<0x%02X>", b), int32(TokenByte)
	}
	for i := special; i < n; i++ {
		tokens[i], types[i], scores[i] = fmt.Sprintf("\u2581t%d", i), int32(TokenNormal), -float32(i)
	}
	return []KV{
		{KeyTokenizerModel, "llama"},
		{KeyTokens, Array{TypeString, tokens}},
		{KeyScores, Array{TypeFloat32, scores}},
		{KeyTokenType, Array{TypeInt32, types}},
		{KeyUnkID, uint32(0)},
		{KeyBOSID, uint32(1)},
		{KeyEOSID, uint32(2)},
		{KeyAddBOS, true},
	}, nil
}
