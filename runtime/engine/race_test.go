//go:build race

package engine_test

// raceEnabled: under the race detector the lane tests run shorter
// generations (the race detector slows the cpu kernels tenfold); the
// emulator's lane swap runs without it only.
const raceEnabled = true
