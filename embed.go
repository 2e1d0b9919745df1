// Package strata holds only the files of the embedded default model (an
// embed directive cannot reach above its package's folder, and the model
// lives in testdata/tiny-go); package runtime/load opens it. Everything else is in
// named packages: see docs/architecture.md.
package strata

import "embed"

// DefaultModel holds the default model's checkpoint, under DefaultModelDir:
// tiny-go (testdata/tiny-go/README.md), an 11.9M-parameter
// Qwen3.8-Flash-Next-architecture model trained on Go source and fortunes,
// with its MTP head and tokenizer.
//
//go:embed testdata/tiny-go/config.json testdata/tiny-go/generation_config.json testdata/tiny-go/model.safetensors testdata/tiny-go/tokenizer.json testdata/tiny-go/tokenizer_config.json
var DefaultModel embed.FS

// DefaultModelDir is the default model's folder in DefaultModel.
const DefaultModelDir = "testdata/tiny-go"
