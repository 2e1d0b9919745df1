package graph

import "fmt"

// ParamsBuffer names the params buffer, and the binding (slot 0 of every
// dispatch, MSL `params`) that it is read through.
const ParamsBuffer = "params"

// The params buffer is the contract between the host and a window graph:
// the host writes these fields before every window.
const (
	ParamRows   = "rows"   // live rows of this window (≤ the graph's T)
	ParamPos    = "pos"    // position of row 0
	ParamTokens = "tokens" // token ids of the live rows
)

// The params header's layout in 32-bit words: every backend reads the header
// at these indices (runtime/backend/cpu, and the MSL prelude, where the generator
// emits them as params_rows, params_pos and params_tokens), and the generator
// places ParamRows, ParamPos and ParamTokens at these offsets (×4 bytes).
const (
	ParamRowsWord   = 0 // ParamRows: one word
	ParamPosWord    = 1 // ParamPos: one word
	ParamTokensWord = 4 // ParamTokens: one word per row of the graph, after a 16-byte header
)

// ParamsBytes is the size of the params header of a graph of rows rows.
func ParamsBytes(rows int) int64 { return 4 * int64(ParamTokensWord+rows) }

// ParamPLE names the field holding PLE layer l's gathered n-gram rows (f32,
// T × ple embed dim).
func ParamPLE(layer int) string { return fmt.Sprintf("ple.%d", layer) }

// ExpertPage is the granularity of routed-expert addresses: an smap entry is
// chunk << 28 | page, and an expert's block starts on a page (16 KiB, as the
// .experts pack aligns its entries).
const ExpertPage = 16 << 10

// SmapMiss is the smap entry of an expert that is not resident.
const SmapMiss = ^uint32(0)
