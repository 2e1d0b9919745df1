package graph

// Family names a kernel family: the generator's catalog (gen/catalog.go)
// declares its constants and bindings, templates/msl/<family>.metal.tmpl holds
// its MSL body, runtime/backend/cpu has one Go function for it, and every Dispatch
// says which family it launches. The names are declared here once so that a
// misspelt family fails to compile instead of failing at load time.
type Family string

// The kernel families, in catalog block order.
const (
	FamilyEmbed       Family = "embed"         // token rows of the embedding table
	FamilyRMSNorm     Family = "rmsnorm"       // RMS norm of each row (or of each group of a row)
	FamilyMatmul      Family = "matmul"        // rows × weight matrix in its storage format
	FamilyResidualAdd Family = "residual_add"  // x += y, row by row
	FamilySwiGLU      Family = "swiglu"        // silu(gate) · up of the dense MLP
	FamilyCopyLastRow Family = "copy_last_row" // the last live row only (last-row logits)
	FamilyCopyRows    Family = "copy_rows"     // a plain row copy
	FamilyConcat      Family = "concat"        // [a | b] per row
	FamilyStreamAdd   Family = "stream_add"    // broadcast one row into every hyper-connection stream
	FamilyGDNConv     Family = "gdn_conv"      // Gated DeltaNet: causal conv over the window
	FamilyGDNGates    Family = "gdn_gates"     // Gated DeltaNet: decay and β gates
	FamilyGDNRule     Family = "gdn_rule"      // Gated DeltaNet: the delta-rule state update
	FamilyGDNNormGate Family = "gdn_norm_gate" // Gated DeltaNet: output norm and gate
	FamilyAttnPrep    Family = "attn_prep"     // attention: q/k norm, RoPE, KV-cache write
	FamilyAttention   Family = "attention"     // attention over the cache (dense or sparse)
	FamilyRouter      Family = "router"        // MoE router: top-k experts per row
	FamilyMoEGateUp   Family = "moe_gate_up"   // routed experts: gate and up projections
	FamilyMoEDown     Family = "moe_down"      // routed experts: down projection
	FamilyMoECombine  Family = "moe_combine"   // weighted sum of the experts (+ shared expert)
	FamilyHCAct       Family = "hc_act"        // hyper-connections: mixing weights of a row
	FamilyHCMix       Family = "hc_mix"        // hyper-connections: read the streams
	FamilyHCInject    Family = "hc_inject"     // hyper-connections: write back into the streams
	FamilyPLEGate     Family = "ple_gate"      // per-layer embeddings: gated injection
	FamilyPLEConv     Family = "ple_conv"      // per-layer embeddings: dilated conv over n-gram rows
	FamilyIndexPrep   Family = "index_prep"    // sparse-attention indexer: queries
	FamilyIndexPool   Family = "index_pool"    // sparse-attention indexer: pooled block keys
	FamilyIndexSelect Family = "index_select"  // sparse-attention indexer: top blocks per row
	FamilyArgmax      Family = "argmax"        // greedy's choice per logits row, and whether the row is finite
)

// Kernel is the kernel name of a family specialized for a storage format
// (matmul_q4_k): formatted families get one kernel per format they read.
func (f Family) Kernel(format string) string { return string(f) + "_" + format }

// ConstIdents are the MSL identifiers of family f's function constant name:
// ident is the constant itself (fc_<family>_<name>), derived the value a
// kernel reads, with an optional constant's default applied
// (<family>_<name>). The shared grid offsets have no family (f == ""):
// fc_<name> and <name>. The generator declares them in kernels.metal under
// these names and every backend that reads kernels.metal looks them up so.
func (f Family) ConstIdents(name ConstName) (ident, derived string) {
	if f == "" {
		return "fc_" + string(name), string(name)
	}
	return "fc_" + string(f) + "_" + string(name), string(f) + "_" + string(name)
}
