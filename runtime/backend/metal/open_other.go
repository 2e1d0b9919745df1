//go:build !(darwin && arm64)

package metal

import "errors"

// Open starts a backend on the system's default Metal device. Metal is
// only reachable on darwin/arm64 (Apple silicon); elsewhere Open fails, and
// the encoding is checked against a Recorder instead.
func Open(Kernels, Options) (*Backend, error) {
	return nil, errors.New("metal: the Metal backend needs macOS on Apple silicon (darwin/arm64)")
}
