package e2e

import (
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
)

// QuantFormats are the block formats models/quant has: every one needs an
// MSL decoder, and the backends' quant suites cover each.
func QuantFormats() []string {
	var out []string
	for _, name := range quant.Quantizable() {
		if f, _ := quant.Lookup(name); f.BlockElems > 1 {
			out = append(out, name)
		}
	}
	return out
}

// QuantGGUFCase is an oracle converted with a quant plan that the GPU
// backends must run as the cpu backend does.
type QuantGGUFCase struct {
	Oracle, Plan string
	Slow         bool // skipped with -short
}

// QuantGGUFCases are the README's plan (with its llama.cpp fallbacks:
// iq4_nl experts for rows of 64 and 32, a q8_0 head), the 256-block formats
// padded, and q4-a (qwen4exp: hyper-connection rows of 16) with really
// iq2_xs experts. Between them every format appears (TestMSLEmuQuantKernels
// puts each in every role).
var QuantGGUFCases = []QuantGGUFCase{
	{"tiny-a", "experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k", false},
	{"tiny-a", "trunk=q4_k,embed=iq4_xs,head=q6_k,rows=pad", false},
	// The formats llama.cpp's standard mixes add, padded.
	{"tiny-a", "trunk=q4_0,experts=q2_k,embed=q5_0,head=q5_k,rows=pad", true},
	{"tiny-a", "trunk=q5_1,experts=q3_k,embed=q4_1,head=q2_k,rows=pad", true},
	// The router in q8_0 as this case always ran it: with the f16 router
	// convert now writes by default, position 76 of q4-a's reference prompt
	// has an expert choice so near a tie that the cpu's and the MSL's float32
	// sums (in different orders) pick differently, one row off by 2e-2 and its
	// neighbours by 5e-4 through attention, which says nothing about either
	// backend's kernels. The f16 router's matmul is covered by tiny-a's plans.
	{"q4-a", "experts=iq2_xs,trunk=q8_0,router=q8_0,rows=pad", true},
	// Experts with gate/up in iq4_nl and down (rows of 16) in f16: each
	// expert kernel decodes its own parts' format.
	{"tiny-k512", "experts=iq2_xs", true},
}

// QuantLogitsTol bounds the relative L2 distance per position between a GPU
// backend's logits (mslemu, cuda) and the cpu backend's for one quantized
// model: float32 against float64 accumulation, as for the unquantized
// oracles (measured ≤ 1e-5).
const QuantLogitsTol = 5e-5

// QuantKernelConfig is a small model whose trunk, experts, embeddings and
// head are stored in formats[i], formats[i+1], formats[i+2] and
// formats[i+3] (cyclically), rows padded: run for every i, each format is
// read by matmul (trunk and head), moe_gate_up, moe_down and embed. Sizes
// are off every tile where the formats allow: rows must be whole 32-element
// decoder chunks, so hidden 288 (one whole 256-element super-block and a
// padded one), expert rows of 96 and shared-expert rows of 64 (padded),
// vocabulary 301, 40 experts, windows of 11 and 3 rows.
func QuantKernelConfig(t testing.TB, formats []string, i int) *models.Config {
	c, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	f := func(j int) string { return formats[(i+j)%len(formats)] }
	c.Name = "quant-" + f(0)
	arch := &c.Architecture
	arch.NumLayers, arch.LayerTypes = 2, []string{"linear_attention", "full_attention"}
	arch.HiddenSize, arch.VocabSize = 288, 301
	arch.Attention.NumHeads, arch.Attention.NumKVHeads, arch.Attention.HeadDim = 3, 1, 32
	arch.LinearAttention.NumKeyHeads, arch.LinearAttention.NumValueHeads = 2, 6
	arch.LinearAttention.KeyHeadDim, arch.LinearAttention.ValueHeadDim = 20, 16
	arch.MoE.NumExperts, arch.MoE.ExpertsPerToken = 40, 3
	arch.MoE.IntermediateSize, arch.MoE.SharedExpertIntermediateSize = 96, 64
	arch.MTP.NumLayers = 1
	c.Quant = models.QuantPlan{Trunk: f(0), Experts: f(1), Embeddings: f(2), Head: f(3), Rows: "pad"}
	c.Windows.MaxDecodeRows, c.Windows.PrefillRows = 3, 11
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

// QuantKernelModels returns QuantKernelConfig for every i with its graphs,
// and one artifact holding the kernels of all of them: they differ only in
// storage formats, so one library (one emulator build) serves every one.
// None may be missing.
func QuantKernelModels(t testing.TB) ([]*models.Config, [][]*graph.Graph, *artifact.Artifact) {
	t.Helper()
	formats := QuantFormats()
	var configs []*models.Config
	var graphs [][]*graph.Graph
	var all []*graph.Graph
	for i := range formats {
		c := QuantKernelConfig(t, formats, i)
		gs, err := gen.Windows(c, true)
		if err != nil {
			t.Fatal(err)
		}
		configs, graphs, all = append(configs, c), append(graphs, gs), append(all, gs...)
	}
	am, err := gen.Kernels(configs[0], all)
	if err != nil {
		t.Fatal(err)
	}
	if len(am.Missing) > 0 {
		t.Fatalf("kernels missing: %v", am.Missing)
	}
	return configs, graphs, am
}
