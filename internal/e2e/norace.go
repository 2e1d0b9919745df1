//go:build !race

package e2e

// Race: see race.go.
const Race = false
