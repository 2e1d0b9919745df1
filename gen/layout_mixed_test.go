package gen

import (
	"strings"
	"testing"

	"github.com/strata-llm/strata/models"
)

// Per-role formats that make one layer's experts larger than another's (a
// Q4_K_M file's q6_k down in some layers) still give every expert the same
// block: the streaming arena's one slot size, the largest layer's.
func TestLayoutMixedExpertBlocks(t *testing.T) {
	c, err := models.Embedded("qwen3-next-80b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	cc := *c
	cc.Quant.Tensors = &models.TensorFormats{ByName: map[string]string{}}
	for l := 0; l < cc.Architecture.NumLayers; l++ {
		for _, p := range []string{"gate", "up", "down"} {
			f := "q4_k"
			if p == "down" && l%3 == 0 {
				f = "q6_k"
			}
			cc.Quant.Tensors.ByName[models.LayerTensor(l, "moe.experts."+p)] = f
		}
	}
	w, err := layoutWeights(&cc)
	if err != nil {
		t.Fatal(err)
	}
	a := cc.Architecture
	big, small := w.tensor(models.LayerTensor(0, "moe.experts.down")), w.tensor(models.LayerTensor(1, "moe.experts.down"))
	if big.Format != "q6_k" || small.Format != "q4_k" {
		t.Fatalf("down formats %s and %s, want q6_k and q4_k", big.Format, small.Format)
	}
	// q4_k gate+up (144 B per 256) and q6_k down (210 B per 256), page-rounded.
	need := int64(2*a.MoE.IntermediateSize*a.HiddenSize/256*144 + a.HiddenSize*a.MoE.IntermediateSize/256*210)
	for l := 0; l < a.NumLayers; l++ {
		g := w.tensor(models.LayerTensor(l, "moe.experts.gate"))
		if g.Stride != big.Stride || g.Stride < need {
			t.Fatalf("layer %d: expert block %d bytes, layer 0's %d (at least %d)", l, g.Stride, big.Stride, need)
		}
	}
}

// Gate and up in different formats are refused by name: moe_gate_up reads
// both through one decoder.
func TestLayoutGateUpOneFormat(t *testing.T) {
	c, err := models.Embedded("qwen3-next-80b-a3b")
	if err != nil {
		t.Fatal(err)
	}
	cc := *c
	cc.Quant.Tensors = &models.TensorFormats{ByName: map[string]string{
		models.LayerTensor(2, "moe.experts.gate"): "q4_k", models.LayerTensor(2, "moe.experts.up"): "q6_k",
	}}
	_, err = layoutWeights(&cc)
	if want := "tensor layers.2.moe.experts.gate is stored as q4_k and layers.2.moe.experts.up as q6_k"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want an error containing %q", err, want)
	}
}
