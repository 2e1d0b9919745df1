//go:build race

package quant

import (
	"runtime"
	"unsafe"
)

// raceReadRange tells the race detector of a read of the n bytes at p: a
// function it skips (go:norace) that reads in a loop reports its reads at
// once, as one range per slice instead of a call per element.
func raceReadRange(p unsafe.Pointer, n int) { runtime.RaceReadRange(p, n) }
