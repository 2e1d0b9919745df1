package strata

import "io/fs"

// DefaultModelFile returns one file of the embedded default model's
// directory (config.json, tokenizer.json, ...); an error wrapping
// fs.ErrNotExist when the default model does not embed it.
func DefaultModelFile(name string) ([]byte, error) {
	return fs.ReadFile(defaultModel, defaultModelDir+"/"+name)
}
