// Package sharedrefs finds the reference files the tests read from
// ../shared (the folder beside the repository that CI always has) instead
// of from copies in testdata/: the tracked tree has to fit, with a build,
// into the 64 MiB a GPU machine is sent.
package sharedrefs

import (
	"os"
	"path/filepath"
)

// Qwen3Tokenizer is the path of the real Qwen3 tokenizer (HF's
// tokenizer.json, gzipped: 2 MB), ../shared/tokenizer-refs/qwen3/ beside the
// module root found from the working directory up. A copy at
// testdata/tokenizer-refs/qwen3/ in the module, where someone puts one, is
// read instead.
func Qwen3Tokenizer() string {
	root := moduleRoot()
	local := filepath.Join(root, "testdata", "tokenizer-refs", "qwen3", "tokenizer.json.gz")
	if _, err := os.Stat(local); err == nil {
		return local
	}
	return filepath.Join(root, "..", "shared", "tokenizer-refs", "qwen3", "tokenizer.json.gz")
}

// moduleRoot is the nearest folder from the working directory up that
// holds a go.mod ("." if none does).
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "."
		}
		dir = up
	}
}
