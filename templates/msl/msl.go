// Package msl holds the MSL kernel templates (Go text/template, one per
// kernel family, plus the prelude and one decoder per storage format) and
// the metal_stdlib stand-in header that type-checks the generated MSL with
// clang on machines without Apple's compiler.
package msl

import "embed"

// FS holds *.metal.tmpl, formats/*.metal.tmpl and check/metal_stdlib.
//
//go:embed *.metal.tmpl formats/*.metal.tmpl check/metal_stdlib
var FS embed.FS
