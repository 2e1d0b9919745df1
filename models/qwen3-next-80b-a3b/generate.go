// Package qwen3next80ba3b holds the model config of qwen3-next-80b-a3b; go generate writes its
// window graphs under generated/qwen3-next-80b-a3b/.
package qwen3next80ba3b

//go:generate go run ../../cmd/stratagen generate --out ../../generated model.toml
