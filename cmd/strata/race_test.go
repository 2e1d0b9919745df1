//go:build race

package main

// raceEnabled: under the race detector (CI's test command) the slowest
// end-to-end tests run on fewer rows: the same paths, a fraction of the
// instrumented generation.
const raceEnabled = true
