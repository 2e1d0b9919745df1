package graph

import "fmt"

// The params buffer is the contract between the host and a window graph:
// the host writes these fields before every window.
const (
	ParamRows   = "rows"   // live rows of this window (≤ the graph's T)
	ParamPos    = "pos"    // position of row 0
	ParamTokens = "tokens" // token ids of the live rows
)

// ParamPLE names the field holding PLE layer l's gathered n-gram rows (f32,
// T × ple embed dim).
func ParamPLE(layer int) string { return fmt.Sprintf("ple.%d", layer) }
