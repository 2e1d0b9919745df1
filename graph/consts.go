package graph

// ConstName names a function constant of a kernel family: a loop-shaping
// integer or bool a Dispatch carries in Consts, declared per family by the
// generator's catalog (gen/catalog.go), read by the cpu kernels by this name
// and by the MSL templates as {{.FC "<name>"}} (checked against the catalog
// when kernels.metal is generated). Families share names that mean the same
// thing; the meaning below is the common one, the catalog says which family
// has which.
type ConstName string

// Shapes every family reads.
const (
	ConstRows ConstName = "rows" // rows of the window graph (T; 1 for last-row tails); the live rows are params' ParamRows
	ConstDim  ConstName = "dim"  // width of a row
)

// Matmul and embedding.
const (
	ConstN      ConstName = "n"      // matmul: output features (weight rows)
	ConstK      ConstName = "k"      // matmul: input features (weight columns)
	ConstFold   ConstName = "fold"   // matmul: sub-rows per row (one per hyper-connection stream), each multiplied (optional, default 1)
	ConstWFmt   ConstName = "wfmt"   // storage format code of the weights read (models/quant's format codes)
	ConstVocab  ConstName = "vocab"  // embed: rows of the table
	ConstCopies ConstName = "copies" // embed: hyper-connection streams each row is written into
)

// Norms, concatenation and hyper-connections.
const (
	ConstGroup       ConstName = "group"        // rmsnorm: width of each group of a row that gets its own statistics
	ConstZeroCentred ConstName = "zero_centred" // rmsnorm: scale by 1 + w (the weight is stored centred on zero), not by w
	ConstA           ConstName = "a"            // concat: width of the first part
	ConstB           ConstName = "b"            // concat: width of the second part
	ConstHidden      ConstName = "hidden"       // hidden size (hyper-connection and expert kernels)
	ConstStreams     ConstName = "streams"      // hyper-connection streams of the residual
	ConstKernel      ConstName = "kernel"       // taps of a causal conv (gdn_conv, ple_conv)
	ConstDilation    ConstName = "dilation"     // ple_conv: stride between the taps
)

// Gated DeltaNet.
const (
	ConstNK          ConstName = "nk"           // key heads
	ConstNV          ConstName = "nv"           // value heads
	ConstDK          ConstName = "dk"           // key head dim
	ConstDV          ConstName = "dv"           // value head dim
	ConstGrouped     ConstName = "grouped"      // q, k, v, z and b, a arrive interleaved per key-head group (qwen3_next's fused projections)
	ConstGateSigmoid ConstName = "gate_sigmoid" // gdn_norm_gate: the output gate is a sigmoid, not silu
)

// Attention and the sparse-attention indexer.
const (
	ConstHeads   ConstName = "heads"    // query heads
	ConstKVHeads ConstName = "kv_heads" // key/value heads
	ConstHeadDim ConstName = "head_dim" // head dim
	ConstRotDim  ConstName = "rot_dim"  // dims of a head that RoPE rotates
	ConstGate    ConstName = "gate"     // attention has an output gate
	ConstCtx     ConstName = "ctx"      // context length (rows of the KV cache)
	ConstSparse  ConstName = "sparse"   // attention reads only the indexer's selected blocks
	ConstRatio   ConstName = "ratio"    // positions per compressed block
	ConstTopK    ConstName = "top_k"    // blocks (indexer) or experts (router, experts) kept per row
)

// Mixture of experts.
const (
	ConstExperts  ConstName = "experts"   // routed experts of the layer
	ConstNormTopK ConstName = "norm_topk" // router: renormalize the top-k weights to sum to one
	ConstMoCE     ConstName = "moce"      // router: MoCE's residency-aware routing (optional)
	ConstProtect  ConstName = "protect"   // router, MoCE: top ranks never swapped for a resident expert
	ConstMaxRank  ConstName = "max_rank"  // router, MoCE: deepest rank a resident expert may be taken from (0: any)
	ConstInter    ConstName = "inter"     // expert intermediate size
	ConstStride   ConstName = "stride"    // bytes between consecutive experts' blocks
	ConstGateOff  ConstName = "gate_off"  // byte offset of the gate projection inside an expert's block
	ConstUpOff    ConstName = "up_off"    // byte offset of the up projection inside an expert's block
	ConstDownOff  ConstName = "down_off"  // byte offset of the down projection inside an expert's block
	ConstShared   ConstName = "shared"    // moe_combine: a shared expert's output is added
	ConstAdd      ConstName = "add"       // moe_combine: the result is added into the residual instead of stored
	// ConstParts: moe_down's outputs per row, moe_combine's inputs per row:
	// 1 (decode and verify windows: moe_down sums the row's experts) or
	// top_k (prefill: one weighted output per chosen expert, summed by
	// moe_combine in rank order, so moe_down can run an expert's rows
	// together on the matrix units).
	ConstParts ConstName = "parts"
)
