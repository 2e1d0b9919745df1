// Package msl holds the MSL kernel templates the generator (gen) renders:
// Go text/template files, one per kernel family, the prelude, and one
// decoder per storage format (formats/). What compiles or checks the
// generated MSL lives with its backend: the lane emulator, its headers and
// the MSL type check in runtime/backend/mslemu, the CUDA prelude in runtime/backend/cuda.
package msl

import "embed"

// FS holds *.metal.tmpl and formats/*.metal.tmpl.
//
//go:embed *.metal.tmpl formats/*.metal.tmpl
var FS embed.FS
