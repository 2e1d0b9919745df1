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
	// matmulSplitMinK: the shortest weight rows (elements) a decode matmul
	// splits over its simdgroups. Below it a row has fewer decoder chunks
	// than the threadgroup has threads (q8_0's chunk is 16 elements), so
	// the split idles threads without shortening any lane's chain of loads:
	// one simdgroup per output row pair does the same in a quarter of the
	// threadgroups (and reads the activations a quarter as often).
	matmulSplitMinK = 2048

	// matmul of a window of more than matmulBatchRows rows (prefill): the
	// matrix units (simdgroup_matrix, 8×8 tiles). A threadgroup decodes a
	// tile of matmulMMAOutputs weight rows × matmulMMADepth columns once
	// into threadgroup memory (float) and multiplies it with a tile of
	// matmulMMARows (sub-)rows of activations; its matmulSimdgroups (2 × 2)
	// each accumulate 4 × 2 output tiles of 8 outputs × 8 rows.
	matmulMMAOutputs = 64
	matmulMMARows    = 32
	matmulMMADepth   = 32
	// matmulMMAMinN: the fewest outputs a prefill matmul takes the matrix
	// units for. Below it the tiles' grid (n/64 × rows/32 threadgroups, each
	// stepping through all of k) is too small to fill a GPU (Flash-Next's
	// n = 1, 4 and 48 rows, some with k = 10240), while the scalar kernel,
	// which re-reads the activations once per 8 outputs, moves little. (On
	// an H100, n=320 k=10240 was faster scalar, 478 against 592 µs at 512
	// rows, n=512 and 640 slower; 384 would move the oracles' matrices, and
	// with them the emulator's check of the tiles, off the matrix units.)
	matmulMMAMinN = 128

	// moe_gate_up / moe_down: one expert row per simdgroup.
	expertSimdgroups = 4
	// moe_gate_up of a prefill window (matmulMMA): a threadgroup per
	// moeMMAOutputs outputs of one expert, for every row that chose it, on
	// the matrix units (the matmul's tiles: gate and up rows together fill
	// matmulMMAOutputs).
	moeMMAOutputs = matmulMMAOutputs / 2

	// gdn_rule: each simdgroup keeps ruleColumns columns of a value head's
	// recurrent state in registers, its lanes splitting the key dimension.
	// Four rather than eight columns double the threadgroups (Flash-Next's
	// 48 value heads × 128 columns: 384 of them): on an H100 a decode
	// window's gdn_rule went from 23.2 to 19.2 µs, a 512-row one's from
	// 1.11 to 0.75 ms.
	ruleSimdgroups = 4
	ruleColumns    = 4

	// attention: the simdgroups of a (row, head) split its keys and merge
	// their online-softmax partials in threadgroup memory.
	attnSimdgroups = 4

	// Per-channel kernels (gdn_conv, ple_conv) and index_select.
	channelThreads = 256
	selectThreads  = 256
	// argmax: one threadgroup reads a logits row (a vocabulary of up to
	// ~250K floats), so it takes as many threads as a threadgroup may hold.
	argmaxThreads = 1024

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

// matmulGrid covers n output rows of a window of rows rows, each of fold
// sub-rows. A window of more than matmulBatchRows rows (prefill) of a matrix
// of at least matmulMMAMinN rows takes the matrix-unit path: a threadgroup
// per matmulMMAOutputs outputs × matmulMMARows sub-rows. Otherwise (decode and verify windows, whose bits
// speculative decoding relies on) the scalar kernel: within one batch of
// sub-rows, for n up to matmulSplitMaxN and k from matmulSplitMinK, the simdgroups of a threadgroup
// split each row's chunks and a threadgroup computes matmulRowsPerSimdgroup
// outputs; past it each simdgroup computes its own.
func matmulGrid(n, k, rows, fold int) [3]int {
	sub := rows * fold
	if matmulMMA(rows, n) {
		return [3]int{ceilDiv(n, matmulMMAOutputs), ceilDiv(sub, matmulMMARows), 1}
	}
	if sub <= matmulBatchRows && n <= matmulSplitMaxN && k >= matmulSplitMinK {
		return [3]int{ceilDiv(n, matmulRowsPerSimdgroup), 1, 1}
	}
	return [3]int{ceilDiv(n, matmulSimdgroups*matmulRowsPerSimdgroup), ceilDiv(sub, matmulBatchRows), 1}
}

// matmulMMA reports whether a matmul of n outputs in a window of rows rows
// takes the matrix-unit path (the kernel makes the same choice from its
// rows and n constants).
func matmulMMA(rows, n int) bool { return rows > matmulBatchRows && n >= matmulMMAMinN }
