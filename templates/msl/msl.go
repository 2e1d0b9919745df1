// Package msl holds the MSL kernel templates (Go text/template, one per
// kernel family, plus the prelude and one decoder per storage format), the
// metal_stdlib stand-in header that type-checks the generated MSL with
// clang on machines without Apple's compiler, and the lane emulator that
// runs it on the CPU (emu/: its metal_stdlib, runtime and sanitizer driver,
// used by runtime/mslemu).
package msl

import "embed"

// FS holds *.metal.tmpl, formats/*.metal.tmpl, check/metal_stdlib and emu/.
//
//go:embed *.metal.tmpl formats/*.metal.tmpl check/metal_stdlib emu/metal_stdlib emu/*.cpp cuda/metal_stdlib cuda/clang_check.h
var FS embed.FS
