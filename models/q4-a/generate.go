// Package q4a holds the model config of q4-a; go generate writes its window
// graphs under generated/q4-a/.
package q4a

//go:generate go run ../../cmd/stratagen generate --out ../../generated model.toml
