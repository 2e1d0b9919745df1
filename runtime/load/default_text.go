package load

import (
	"io/fs"

	"github.com/strata-llm/strata"
	_ "github.com/strata-llm/strata/generated/tiny-go" // the default model's artifact, compiled in
	"github.com/strata-llm/strata/runtime/format/planes"
)

// DefaultModelFile returns one file of the embedded default model's
// directory (config.json, tokenizer.json, ...), decoded where the binary
// holds FILE.planes; an error wrapping fs.ErrNotExist when the default model
// does not embed it.
func DefaultModelFile(name string) ([]byte, error) {
	return EmbeddedFile(TinyGo, name)
}

// EmbeddedFile returns one file of an embedded model's directory (TinyGo or
// TinyGoChat): the chat model's checkpoint is its own, the rest tiny-go's.
func EmbeddedFile(model, name string) ([]byte, error) {
	dir := strata.DefaultModelDir
	if model == TinyGoChat && name == "model.safetensors" {
		dir = strata.ChatModelDir
	}
	return planes.ReadFile(strata.DefaultModel, dir+"/"+name)
}

// cachedCheckpoint is the path of model's decoded checkpoint in the
// planes cache, or "" where there is none.
func cachedCheckpoint(model string) (string, error) {
	dir := strata.DefaultModelDir
	if model == TinyGoChat {
		dir = strata.ChatModelDir
	}
	return planes.Cached(strata.DefaultModel, dir+"/model.safetensors")
}

// DefaultModelFS is the embedded default model's directory as an fs.FS.
func DefaultModelFS() fs.FS {
	sub, err := fs.Sub(strata.DefaultModel, strata.DefaultModelDir)
	if err != nil {
		panic(err) // DefaultModelDir is a valid constant path
	}
	return sub
}
