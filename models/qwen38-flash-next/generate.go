// Package qwen38flashnext holds the model config of qwen38-flash-next; go
// generate writes its window graphs under generated/qwen38-flash-next/.
package qwen38flashnext

//go:generate go run ../../cmd/stratagen generate --out ../../generated model.toml
