//go:build race

package cpu

// raceEnabled: under the race detector TestAttentionTiles runs fewer and
// smaller windows.
const raceEnabled = true
