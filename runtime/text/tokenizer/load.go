package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/strata-llm/strata/runtime/format/planes"
)

// Load reads an HF tokenizer.json (gzip-compressed when the name ends in
// .gz; PATH.planes decoded when PATH itself is absent).
func Load(path string) (*Tokenizer, error) {
	var data []byte
	if strings.HasSuffix(path, ".gz") {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
		}
		defer zr.Close()
		if data, err = io.ReadAll(zr); err != nil {
			return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
		}
	} else {
		var err error
		if data, err = planes.ReadOSFile(path); err != nil { // the file, else FILE.planes decoded
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return t, nil
}

type fileJSON struct {
	AddedTokens []struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		SingleWord bool   `json:"single_word"`
		LStrip     bool   `json:"lstrip"`
		RStrip     bool   `json:"rstrip"`
		Normalized bool   `json:"normalized"`
		Special    bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Decoder       json.RawMessage `json:"decoder"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Model         struct {
		Type                    string          `json:"type"`
		Dropout                 *float64        `json:"dropout"`
		UnkToken                *string         `json:"unk_token"`
		ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
		FuseUnk                 bool            `json:"fuse_unk"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		Vocab                   map[string]int  `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
	} `json:"model"`
}

type component struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	Pretokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       bool   `json:"use_regex"`
}

// Parse builds a tokenizer from the bytes of a tokenizer.json.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	m := f.Model
	if m.Type != "BPE" {
		return nil, fmt.Errorf("model.type %q is not supported (only byte-level \"BPE\")", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("model.dropout %v is not supported (only null)", *m.Dropout)
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return nil, fmt.Errorf("model.continuing_subword_prefix %q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return nil, fmt.Errorf("model.end_of_word_suffix %q is not supported", *m.EndOfWordSuffix)
	}
	if m.FuseUnk {
		return nil, fmt.Errorf("model.fuse_unk true is not supported")
	}
	t := &Tokenizer{vocab: make(map[string]int32, len(m.Vocab)), unk: -1,
		ignoreMerges: m.IgnoreMerges, byteFallback: m.ByteFallback}
	for s, id := range m.Vocab {
		if id < 0 || id >= 1<<24 {
			return nil, fmt.Errorf("model.vocab[%q] = %d: id out of range", s, id)
		}
		t.vocab[s] = int32(id)
	}
	var err error
	if t.ranked, err = parseMerges(m.Merges); err != nil {
		return nil, err
	}
	for _, a := range f.AddedTokens {
		switch {
		case a.SingleWord:
			return nil, fmt.Errorf("added token %q: single_word true is not supported", a.Content)
		case a.LStrip:
			return nil, fmt.Errorf("added token %q: lstrip true is not supported", a.Content)
		case a.RStrip:
			return nil, fmt.Errorf("added token %q: rstrip true is not supported", a.Content)
		case a.ID < 0 || a.ID >= 1<<24:
			return nil, fmt.Errorf("added token %q: id %d out of range", a.Content, a.ID)
		}
		t.added = append(t.added, addedToken{a.Content, int32(a.ID), a.Special, a.Normalized})
	}
	if m.UnkToken != nil {
		id, ok := t.vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("model.unk_token %q is not in the vocabulary", *m.UnkToken)
		}
		t.unk = id
	}
	if t.normalize, err = checkNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := checkPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if err := t.build(); err != nil {
		return nil, err
	}
	return t, nil
}

// parseMerges reads model.merges: "left right" strings (older files) or
// [left, right] pairs (newer ones).
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var pairs [][2]string
	if err := json.Unmarshal(raw, &pairs); err == nil {
		return pairs, nil
	}
	var strs []string
	if err := json.Unmarshal(raw, &strs); err != nil {
		return nil, fmt.Errorf("model.merges: want a list of \"left right\" strings or of [left, right] pairs: %w", err)
	}
	pairs = make([][2]string, len(strs))
	for i, s := range strs {
		a, b, ok := strings.Cut(s, " ")
		if !ok {
			return nil, fmt.Errorf("model.merges[%d] %q: want \"left right\"", i, s)
		}
		pairs[i] = [2]string{a, b}
	}
	return pairs, nil
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// checkNormalizer accepts none, NFC, or a Sequence of NFC; it reports whether
// NFC applies.
func checkNormalizer(raw json.RawMessage) (bool, error) {
	if isNull(raw) {
		return false, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return false, fmt.Errorf("normalizer: %w", err)
	}
	switch c.Type {
	case "NFC":
		return true, nil
	case "Sequence":
		nfc := false
		for _, n := range c.Normalizers {
			ok, err := checkNormalizer(n)
			if err != nil {
				return false, err
			}
			nfc = nfc || ok
		}
		return nfc, nil
	}
	return false, fmt.Errorf("normalizer type %q is not supported (only NFC)", c.Type)
}

// checkPreTokenizer accepts the Qwen2 layout: Split on the Qwen pattern
// (Isolated), then ByteLevel without its own regex or prefix space.
func checkPreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("pre_tokenizer is missing (want the Qwen2 Split + ByteLevel sequence)")
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("pre_tokenizer: %w", err)
	}
	if c.Type != "Sequence" || len(c.Pretokenizers) != 2 {
		return fmt.Errorf("pre_tokenizer type %q is not supported (only Sequence[Split, ByteLevel] as Qwen2 ships it)", c.Type)
	}
	var split, bl component
	if err := json.Unmarshal(c.Pretokenizers[0], &split); err != nil {
		return fmt.Errorf("pre_tokenizer: %w", err)
	}
	if err := json.Unmarshal(c.Pretokenizers[1], &bl); err != nil {
		return fmt.Errorf("pre_tokenizer: %w", err)
	}
	switch {
	case split.Type != "Split":
		return fmt.Errorf("pre_tokenizer[0] type %q is not supported (want Split)", split.Type)
	case split.Pattern.Regex == nil || *split.Pattern.Regex != qwenPattern:
		return fmt.Errorf("pre_tokenizer Split pattern is not supported (only the Qwen2 regex %q)", qwenPattern)
	case split.Behavior != "Isolated" || split.Invert:
		return fmt.Errorf("pre_tokenizer Split behavior %q invert %v is not supported (want Isolated, false)", split.Behavior, split.Invert)
	case bl.Type != "ByteLevel":
		return fmt.Errorf("pre_tokenizer[1] type %q is not supported (want ByteLevel)", bl.Type)
	case bl.AddPrefixSpace:
		return fmt.Errorf("pre_tokenizer ByteLevel add_prefix_space true is not supported")
	case bl.UseRegex:
		return fmt.Errorf("pre_tokenizer ByteLevel use_regex true is not supported")
	}
	return nil
}

func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("decoder is missing (want ByteLevel)")
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("decoder: %w", err)
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("decoder type %q is not supported (only ByteLevel)", c.Type)
	}
	return nil
}
