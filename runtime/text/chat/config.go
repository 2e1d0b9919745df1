package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Config is what an HF checkpoint says about chat and generation:
// tokenizer_config.json (or chat_template.jinja) and generation_config.json.
type Config struct {
	Template    string        // the chat template source, "" when none
	Tokens      SpecialTokens // special token strings
	AddBOS      bool          // tokenizer_config add_bos_token
	EOSTokenIDs []int         // generation_config eos_token_id
	PadTokenID  *int          // generation_config pad_token_id
	BOSTokenID  *int          // generation_config bos_token_id
}

// LoadConfig reads dir/tokenizer_config.json, dir/chat_template.jinja and
// dir/generation_config.json; missing files leave their fields empty.
func LoadConfig(dir string) (*Config, error) { return LoadConfigFS(os.DirFS(dir), dir) }

// LoadConfigFS is LoadConfig over the files at the root of fsys (an
// embedded model, say); where names the folder in errors.
func LoadConfigFS(fsys fs.FS, where string) (*Config, error) {
	c := &Config{}
	read := func(name string, parse func([]byte) error) error {
		data, err := fs.ReadFile(fsys, name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err == nil {
			err = parse(data)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(where, name), err)
		}
		return nil
	}
	if err := read("tokenizer_config.json", c.parseTokenizerConfig); err != nil {
		return nil, err
	}
	if err := read("chat_template.jinja", func(b []byte) error { c.Template = string(b); return nil }); err != nil {
		return nil, err
	}
	if err := read("generation_config.json", c.parseGenerationConfig); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Config) parseTokenizerConfig(data []byte) error {
	var f struct {
		ChatTemplate json.RawMessage   `json:"chat_template"`
		BOS          json.RawMessage   `json:"bos_token"`
		EOS          json.RawMessage   `json:"eos_token"`
		PAD          json.RawMessage   `json:"pad_token"`
		UNK          json.RawMessage   `json:"unk_token"`
		Additional   []json.RawMessage `json:"additional_special_tokens"`
		AddBOS       bool              `json:"add_bos_token"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	var err error
	if c.Template, err = templateField(f.ChatTemplate); err != nil {
		return err
	}
	for _, p := range []struct {
		raw json.RawMessage
		dst *string
		key string
	}{{f.BOS, &c.Tokens.BOS, "bos_token"}, {f.EOS, &c.Tokens.EOS, "eos_token"},
		{f.PAD, &c.Tokens.PAD, "pad_token"}, {f.UNK, &c.Tokens.UNK, "unk_token"}} {
		if *p.dst, err = tokenField(p.raw); err != nil {
			return fmt.Errorf("%s: %w", p.key, err)
		}
	}
	for i, raw := range f.Additional {
		s, err := tokenField(raw)
		if err != nil {
			return fmt.Errorf("additional_special_tokens[%d]: %w", i, err)
		}
		c.Tokens.Additional = append(c.Tokens.Additional, s)
	}
	c.AddBOS = f.AddBOS
	return nil
}

// templateField accepts a string or transformers' list of named templates
// (the one named "default" is used).
func templateField(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var named []struct{ Name, Template string }
	if err := json.Unmarshal(raw, &named); err != nil {
		return "", fmt.Errorf("chat_template: want a string or a list of {name, template}: %w", err)
	}
	for _, n := range named {
		if n.Name == "default" {
			return n.Template, nil
		}
	}
	return "", fmt.Errorf("chat_template: no template named \"default\"")
}

// tokenField accepts a token string, an AddedToken object {"content": ...} or null.
func tokenField(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var obj struct{ Content string }
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("want a string or {\"content\": ...}: %w", err)
	}
	return obj.Content, nil
}

func (c *Config) parseGenerationConfig(data []byte) error {
	var f struct {
		EOS json.RawMessage `json:"eos_token_id"`
		PAD json.RawMessage `json:"pad_token_id"`
		BOS json.RawMessage `json:"bos_token_id"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return err
	}
	var err error
	if c.EOSTokenIDs, err = idList(f.EOS); err != nil {
		return fmt.Errorf("eos_token_id: %w", err)
	}
	for _, p := range []struct {
		raw json.RawMessage
		dst **int
		key string
	}{{f.PAD, &c.PadTokenID, "pad_token_id"}, {f.BOS, &c.BOSTokenID, "bos_token_id"}} {
		ids, err := idList(p.raw)
		if err != nil {
			return fmt.Errorf("%s: %w", p.key, err)
		}
		if len(ids) > 0 {
			*p.dst = &ids[0]
		}
	}
	return nil
}

// idList accepts an id, a list of ids or null.
func idList(raw json.RawMessage) ([]int, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one int
	if json.Unmarshal(raw, &one) == nil {
		return []int{one}, nil
	}
	var many []int
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, fmt.Errorf("want a token id or a list of ids: %w", err)
	}
	return many, nil
}
