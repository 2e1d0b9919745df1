//go:build race

package tokenizer

// raceEnabled shrinks the long-input test under the race detector, which
// slows the heap merge tenfold.
const raceEnabled = true
