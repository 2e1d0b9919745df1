package load

import (
	"io/fs"

	"github.com/strata-llm/strata"
	_ "github.com/strata-llm/strata/generated/tiny-go" // the default model's artifact, compiled in
)

// DefaultModelFile returns one file of the embedded default model's
// directory (config.json, tokenizer.json, ...); an error wrapping
// fs.ErrNotExist when the default model does not embed it.
func DefaultModelFile(name string) ([]byte, error) {
	return fs.ReadFile(strata.DefaultModel, strata.DefaultModelDir+"/"+name)
}

// DefaultModelFS is the embedded default model's directory as an fs.FS.
func DefaultModelFS() fs.FS {
	sub, err := fs.Sub(strata.DefaultModel, strata.DefaultModelDir)
	if err != nil {
		panic(err) // DefaultModelDir is a valid constant path
	}
	return sub
}
