//go:build race

package e2e

// Race is set under the race detector (CI's test command): the end-to-end
// checks then decode fewer greedy tokens one window at a time (the same
// windows and paths; the emulator backends spend most of a test there).
const Race = true
