package gen

// Tile sizes: how the MSL kernels split their work across simdgroups. The
// grid math in layers.go and the kernels (which get these baked into
// kernels.metal) share these definitions, so they cannot disagree. Apple GPUs
// run 32-lane simdgroups.
const (
	simdWidth = 32

	// rowSimdgroups caps a row kernel's threadgroup (rowGroup): 8 simdgroups,
	// 256 threads; their threadgroup reductions hold one float per simdgroup.
	rowSimdgroups = 8

	// matmul: each simdgroup computes matmulRowsPerSimdgroup output rows for
	// up to matmulBatchRows window rows at once, so a decode or verify window
	// of T ≤ 8 reads every weight once; there the matmulSimdgroups of a
	// threadgroup split the rows' chunks (matmulGrid).
	matmulSimdgroups       = 4
	matmulRowsPerSimdgroup = 2
	matmulBatchRows        = 8
	// matmulSplitMaxN: the most output rows a decode matmul splits each row
	// over its threadgroup's simdgroups for; a larger matrix (a vocabulary
	// head) has threadgroups enough for the whole GPU without it.
	matmulSplitMaxN = 32768

	// moe_gate_up / moe_down: one expert row per simdgroup.
	expertSimdgroups = 4

	// gdn_rule: each simdgroup keeps ruleColumns columns of a value head's
	// recurrent state in registers, its lanes splitting the key dimension.
	ruleSimdgroups = 4
	ruleColumns    = 8

	// attention: the simdgroups of a (row, head) split its keys and merge
	// their online-softmax partials in threadgroup memory.
	attnSimdgroups = 16

	// Per-channel kernels (gdn_conv, ple_conv) and index_select.
	channelThreads = 256
	selectThreads  = 256

	// selectCacheMax bounds the block scores index_select keeps in
	// threadgroup memory (16 KiB); past it the scores are recomputed per
	// radix pass.
	selectCacheMax = 4096
	// threadgroupMemoryLimit is what one threadgroup may allocate on Apple GPUs.
	threadgroupMemoryLimit = 32 << 10
)

var (
	matmulThreadgroup = [3]int{simdWidth * matmulSimdgroups, 1, 1}
	expertThreadgroup = [3]int{simdWidth * expertSimdgroups, 1, 1}
)

// matmulGrid covers n output rows of rows window rows (sub-rows, with fold).
// Within one batch of rows (decode and verify windows), for n up to
// matmulSplitMaxN, the simdgroups of a
// threadgroup split each row's chunks and a threadgroup computes
// matmulRowsPerSimdgroup outputs; past it each simdgroup computes its own.
func matmulGrid(n, rows int) [3]int {
	if rows <= matmulBatchRows && n <= matmulSplitMaxN {
		return [3]int{ceilDiv(n, matmulRowsPerSimdgroup), 1, 1}
	}
	return [3]int{ceilDiv(n, matmulSimdgroups*matmulRowsPerSimdgroup), ceilDiv(rows, matmulBatchRows), 1}
}
