package strata

import (
	"fmt"
	"io/fs"
)

// DefaultModelFile returns one file of the embedded default model's
// directory (config.json, tokenizer.json, …).
func DefaultModelFile(name string) ([]byte, error) {
	b, err := fs.ReadFile(defaultModel, defaultModelDir+"/"+name)
	if err != nil {
		return nil, fmt.Errorf("the default model (%s) has no %s: %w", defaultModelName, name, err)
	}
	return b, nil
}
