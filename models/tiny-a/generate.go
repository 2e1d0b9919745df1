// Package tinya holds the model config of tiny-a; go generate writes its
// window graphs under generated/tiny-a/.
package tinya

//go:generate go run ../../cmd/stratagen generate --out ../../generated model.toml
