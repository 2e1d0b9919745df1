// Package tinygo holds the model config of tiny-go; go generate writes its window
// graphs under generated/tiny-go/.
package tinygo

//go:generate go run ../../cmd/stratagen generate --out ../../generated model.toml
