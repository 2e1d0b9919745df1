//go:build race

package spec_test

// raceEnabled: under the race detector the grammar-with-drafts test runs
// one sampled chain at two speculation settings.
const raceEnabled = true
