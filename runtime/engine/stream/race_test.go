//go:build race

package stream_test

// raceEnabled: under the race detector the layer-major oracle test runs the
// smaller oracles and decodes only two tokens (the race detector slows the
// cpu kernels tenfold).
const raceEnabled = true
