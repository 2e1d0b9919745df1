// Package strata holds only the files of the embedded default model (an
// embed directive cannot reach above its package's folder, and the model
// lives in models/tiny-go, the chat model in models/tiny-go-chat); package
// runtime/load opens them. Everything else is in
// named packages: see docs/architecture.md.
package strata

// DefaultModelDir is the default model's folder in DefaultModel.
const DefaultModelDir = "models/tiny-go"

// ChatModelDir is the chat model's folder in DefaultModel: its checkpoint
// only, since it shares tiny-go's config and tokenizer.
const ChatModelDir = "models/tiny-go-chat"
