// Package tinygo is tiny-go, the default model strata embeds: its generator
// config (model.toml, from which go generate writes generated/tiny-go/) and
// its trained checkpoint, tokenizer and float64 references (README.md).
package tinygo

//go:generate go run ../../cmd/stratagen generate --out ../../generated model.toml
