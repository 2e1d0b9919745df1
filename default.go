// Package strata holds only the files of the embedded default model (an
// embed directive cannot reach above its package's folder, and the model
// lives in models/tiny-go); package runtime/load opens it. Everything else is in
// named packages: see docs/architecture.md.
package strata

// DefaultModelDir is the default model's folder in DefaultModel.
const DefaultModelDir = "models/tiny-go"
