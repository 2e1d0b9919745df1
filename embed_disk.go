//go:build strata_default_on_disk

package strata

import (
	"io/fs"
	"os"
)

// DefaultModel, in a binary built with -tags strata_default_on_disk, is read
// from the source tree at $STRATA_SOURCE_ROOT (default: the working folder)
// instead of embedded: test binaries carried to the GPU machine, which
// carries the tree anyway, stay 24 MB smaller (runtime/backend/cuda/testdata/h200.sh).
var DefaultModel fs.FS = os.DirFS(sourceRoot())

func sourceRoot() string {
	if r := os.Getenv("STRATA_SOURCE_ROOT"); r != "" {
		return r
	}
	return "."
}
