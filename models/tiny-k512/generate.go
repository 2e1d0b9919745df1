// Package tinyk512 holds the model config of tiny-k512; go generate writes its
// window graphs under generated/tiny-k512/.
package tinyk512

//go:generate go run ../../cmd/stratagen generate --out ../../generated model.toml
