package models

import (
	"errors"
	"fmt"
)

// ImportOptions are the parts of a model.toml that a model's own
// description (an HF config.json, a GGUF file's metadata) does not say.
type ImportOptions struct {
	Name          string // model folder name; required
	ContextLength int    // 0: min(max_position_embeddings, 32768)
	MaxDecodeRows int    // 0: 4
	PrefillRows   int    // 0: 64
	Source        string // the description's path, used to prefix errors; may be empty
}

// Defaults Imported applies for zero ImportOptions fields.
const (
	DefaultContextCap    = 32768
	DefaultMaxDecodeRows = 4
	DefaultPrefillRows   = 64
)

// Imported completes an architecture read from a model's own description
// (an HF config.json, a GGUF file's metadata): the name, windows and context
// length of opts (their defaults for zero fields), then validation, whose
// errors name opts.Source and the model.toml field.
func Imported(c *Config, opts ImportOptions) (*Config, error) {
	c.Name = opts.Name
	c.Windows.MaxDecodeRows = orDefault(opts.MaxDecodeRows, DefaultMaxDecodeRows)
	c.Windows.PrefillRows = orDefault(opts.PrefillRows, DefaultPrefillRows)
	c.Runtime.ContextLength = opts.ContextLength
	if c.Runtime.ContextLength == 0 {
		c.Runtime.ContextLength = min(c.Architecture.Attention.MaxPositions, DefaultContextCap)
	}
	c.normalize()
	if err := c.Validate(); err != nil {
		return nil, InFile(opts.Source, prefixEach("imported config is invalid", err))
	}
	return c, nil
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// prefixEach puts a context phrase in front of every joined error.
func prefixEach(context string, err error) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, fmt.Errorf("%s: %w", context, e))
		}
		return errors.Join(out...)
	}
	return fmt.Errorf("%s: %w", context, err)
}
