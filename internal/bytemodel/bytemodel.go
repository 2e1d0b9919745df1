// Package bytemodel writes, for tests, the tiny-a oracle as a text model: a
// checkpoint the real engine runs end to end from text.
package bytemodel

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-llm/strata/runtime/format/planes"
)

// Write puts into dir the tiny-a oracle (from testdata under the repository
// root repo) with a tokenizer whose vocabulary is the 256 GPT-2 byte-level
// characters (ids 0-255, no merges) and the three ChatML control tokens
// (256-258: <|endoftext|>, <|im_start|>, <|im_end|>), with Qwen3's chat
// template beside it: a tokenizer that fits tiny-a's 512-token vocabulary.
func Write(dir, repo string) error {
	vocab := map[string]int{}
	next := 256
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !(b >= '!' && b <= '~') && !(b >= 0xA1 && b <= 0xAC) && !(b >= 0xAE && b <= 0xFF) {
			r = rune(next)
			next++
		}
		vocab[string(r)] = b
	}
	var added []map[string]any
	for i, s := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"} {
		added = append(added, map[string]any{"id": 256 + i, "content": s, "special": true})
	}
	bl := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	tok := map[string]any{
		"added_tokens": added,
		"normalizer":   map[string]any{"type": "NFC"},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`},
				"behavior": "Isolated", "invert": false}, bl}},
		"decoder": bl,
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": []any{}},
	}
	data, err := json.Marshal(tok)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644); err != nil {
		return err
	}
	var cfg map[string]any
	qwenCfg := filepath.Join(repo, "testdata", "tokenizer-refs", "qwen3", "tokenizer_config.json")
	raw, err := os.ReadFile(qwenCfg)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return fmt.Errorf("%s: %w", qwenCfg, err)
	}
	data, err = json.Marshal(map[string]any{"chat_template": cfg["chat_template"], "eos_token": "<|im_end|>"})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), data, 0o644); err != nil {
		return err
	}
	for _, name := range []string{"config.json", "model.safetensors"} {
		b, err := planes.ReadOSFile(filepath.Join(repo, "testdata", "oracles", "tiny-a", name))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, name), b, 0o644)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
