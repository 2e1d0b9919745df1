// Package text ties together what turns a model into a text model: its
// tokenizer, its chat template and the ids that end generation, read from an
// HF checkpoint directory, a tokenizer.json, or a GGUF file's metadata, and
// written back into a GGUF as llama.cpp expects.
package text

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/planes"
	"github.com/strata-llm/strata/runtime/text/chat"
	"github.com/strata-llm/strata/runtime/text/tokenizer"
)

// ErrNoTokenizer means the model carries no tokenizer (prompts must be ids).
var ErrNoTokenizer = errors.New("the model has no tokenizer")

// Model is a tokenizer with its chat template and stop ids.
type Model struct {
	Tok *tokenizer.Tokenizer
	// Template renders conversations; nil when the model has none.
	Template *chat.Template
	// TemplateSource is the template's Jinja text ("" when none).
	TemplateSource string
	// Tokens are the special token strings the template sees.
	Tokens chat.SpecialTokens
	// EOS are the ids that end generation (generation_config.json's
	// eos_token_id, else the tokenizer's eos_token).
	EOS []int
	// BOS, PAD are ids or -1; AddBOS says whether prompts start with BOS.
	BOS, PAD int
	AddBOS   bool
	// eos is the single eos id llama.cpp reads (tokenizer_config's eos_token).
	eos int
}

// FromHF reads dir/tokenizer.json (or tokenizer.json.planes) with dir's tokenizer_config.json,
// chat_template.jinja, generation_config.json and config.json (for ids the
// others lack). ErrNoTokenizer when dir has no tokenizer.json.
func FromHF(dir string) (*Model, error) { return FromFS(os.DirFS(dir), dir) }

// FromFS is FromHF over the files at the root of fsys (the embedded default
// model, read where it lies); where names the folder in errors.
func FromFS(fsys fs.FS, where string) (*Model, error) {
	data, err := planes.ReadFile(fsys, "tokenizer.json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", where, ErrNoTokenizer)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	tok, err := tokenizer.Parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", filepath.Join(where, "tokenizer.json"), err)
	}
	return withConfig(tok, fsys, where)
}

// FromTokenizerFile reads a tokenizer.json (or .json.gz) and the HF config
// files beside it, when there are any.
func FromTokenizerFile(path string) (*Model, error) {
	tok, err := tokenizer.Load(path)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	return withConfig(tok, os.DirFS(dir), dir)
}

// withConfig completes tok into a Model from the HF config files at the root
// of fsys (where names them in errors).
func withConfig(tok *tokenizer.Tokenizer, fsys fs.FS, where string) (*Model, error) {
	cfg, err := chat.LoadConfigFS(fsys, where)
	if err != nil {
		return nil, err
	}
	m := &Model{Tok: tok, TemplateSource: cfg.Template, Tokens: cfg.Tokens, AddBOS: cfg.AddBOS,
		BOS: -1, PAD: -1, eos: -1}
	lookup := func(s string) int {
		if id, ok := tok.TokenID(s); ok && s != "" {
			return id
		}
		return -1
	}
	m.eos, m.BOS, m.PAD = lookup(cfg.Tokens.EOS), lookup(cfg.Tokens.BOS), lookup(cfg.Tokens.PAD)
	model := readModelConfig(fsys)
	if m.BOS < 0 {
		m.BOS = firstOr(cfg.BOSTokenID, model.BOS)
	}
	if m.PAD < 0 {
		m.PAD = firstOr(cfg.PadTokenID, model.PAD)
	}
	m.EOS = cfg.EOSTokenIDs
	if len(m.EOS) == 0 && m.eos >= 0 {
		m.EOS = []int{m.eos}
	}
	if len(m.EOS) == 0 {
		m.EOS = model.EOS
	}
	if m.eos < 0 && len(m.EOS) > 0 {
		m.eos = m.EOS[0]
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if m.TemplateSource != "" {
		if m.Template, err = chat.Compile(m.TemplateSource, m.Tokens); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
	}
	return m, nil
}

// modelIDs are config.json's special ids, the last fallback.
type modelIDs struct {
	BOS, PAD *int
	EOS      []int
}

func readModelConfig(fsys fs.FS) modelIDs {
	var out modelIDs
	data, err := fs.ReadFile(fsys, "config.json")
	if err != nil {
		return out
	}
	var f struct {
		BOS json.RawMessage `json:"bos_token_id"`
		EOS json.RawMessage `json:"eos_token_id"`
		PAD json.RawMessage `json:"pad_token_id"`
	}
	if json.Unmarshal(data, &f) != nil {
		return out
	}
	one := func(raw json.RawMessage) *int {
		var v int
		if json.Unmarshal(raw, &v) == nil && string(raw) != "null" {
			return &v
		}
		return nil
	}
	out.BOS, out.PAD = one(f.BOS), one(f.PAD)
	if v := one(f.EOS); v != nil {
		out.EOS = []int{*v}
	} else {
		json.Unmarshal(f.EOS, &out.EOS)
	}
	return out
}

func firstOr(a, b *int) int {
	if a != nil {
		return *a
	}
	if b != nil {
		return *b
	}
	return -1
}

func (m *Model) check() error {
	n := m.Tok.Vocab()
	for _, id := range append([]int{m.BOS, m.PAD, m.eos}, m.EOS...) {
		if id >= n {
			return fmt.Errorf("special token id %d is outside the tokenizer's %d ids", id, n)
		}
	}
	return nil
}

// FromGGUF reads a GGUF file's tokenizer and chat template; ErrNoTokenizer
// when it has none.
func FromGGUF(f *gguf.File) (*Model, error) {
	v, err := gguf.VocabOf(f)
	if err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("%s: %w", f.Path, ErrNoTokenizer)
	}
	tok, err := tokenizer.FromGGUF(v)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", f.Path, err)
	}
	m := &Model{Tok: tok, TemplateSource: v.ChatTemplate, BOS: v.BOS, PAD: v.PAD, AddBOS: v.AddBOS, eos: v.EOS}
	m.EOS = slices.Clone(v.EOSIDs)
	if len(m.EOS) == 0 {
		for _, id := range []int{v.EOS, v.EOT} {
			if id >= 0 && !slices.Contains(m.EOS, id) {
				m.EOS = append(m.EOS, id)
			}
		}
	}
	text := func(id int) string {
		if id < 0 {
			return ""
		}
		return string(tok.TokenBytes(id))
	}
	m.Tokens = chat.SpecialTokens{BOS: text(v.BOS), EOS: text(v.EOS), PAD: text(v.PAD)}
	if m.TemplateSource != "" {
		if m.Template, err = chat.Compile(m.TemplateSource, m.Tokens); err != nil {
			return nil, fmt.Errorf("gguf %s: %w", f.Path, err)
		}
	}
	return m, nil
}

// GGUFMetadata is the tokenizer, special ids and chat template as GGUF keys,
// the token list padded to rows (the model's embedding rows).
func (m *Model) GGUFMetadata(rows int) ([]gguf.KV, error) {
	v, err := m.Tok.GGUFVocab(rows)
	if err != nil {
		return nil, err
	}
	v.BOS, v.EOS, v.PAD, v.AddBOS = m.BOS, m.eos, m.PAD, m.AddBOS
	v.EOSIDs = m.EOS
	v.ChatTemplate = m.TemplateSource
	return v.Metadata(), nil
}

// Encode tokenizes a prompt, adding BOS when the model asks for it.
func (m *Model) Encode(s string) []int {
	ids := m.Tok.Encode(s)
	if m.AddBOS && m.BOS >= 0 {
		ids = append([]int{m.BOS}, ids...)
	}
	return ids
}

// endOfTurn are the texts of control tokens that end a turn whatever the
// configs say, as llama.cpp adds them to its end-of-generation set (a base
// model's generation_config may list only <|endoftext|>, but a chat reply ends
// at <|im_end|>).
var endOfTurn = []string{"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|eom_id|>", "<|end|>", "<end_of_turn>"}

// StopIDs are the ids that end generation: EOS and the end-of-turn control
// tokens the vocabulary has.
func (m *Model) StopIDs() []int {
	ids := slices.Clone(m.EOS)
	for _, s := range endOfTurn {
		if id, ok := m.Tok.TokenID(s); ok && m.Tok.IsSpecial(id) && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// IsStop reports whether id ends generation (one of StopIDs).
func (m *Model) IsStop(id int) bool { return slices.Contains(m.StopIDs(), id) }
