//go:build race

package serve

// raceEnabled: under the race detector the node clients' tool round trips run
// for the first client only (the others drive the same server paths, and each
// costs half a minute of instrumented generation), and the forced tool calls
// without thinking only; the two npm clients at once run a case each.
const raceEnabled = true
