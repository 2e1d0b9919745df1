package models

import "fmt"

// TensorSpec is one weight tensor as the engine sees it: our role name, its
// shape (outermost first, as torch writes it) and its quant-plan class. The
// generator lays these out in buffers; the weight loaders fill them.
type TensorSpec struct {
	Name  string
	Shape []int
	Class string
	// Small tensors (norm weights, gates, conv taps, decay parameters) stay f32
	// whatever the plan says: they are tiny and sit on precision-critical paths.
	Small bool
}

// Elements is the product of the shape.
func (t TensorSpec) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Format is the storage format of the tensor under a quant plan.
func (t TensorSpec) Format(q QuantPlan) string {
	if t.Small {
		return "f32"
	}
	return q.ForClass(t.Class)
}

// LayerTensor names a per-layer role, e.g. LayerTensor(3, "attn.q").
func LayerTensor(layer int, role string) string { return fmt.Sprintf("layers.%d.%s", layer, role) }

// Tensors lists every weight tensor of the model in a fixed order: embeddings,
// then each layer (mixer, then MLP), then the final norm and the head. Routed
// experts appear as stacked [E, ...] tensors.
func (c *Config) Tensors() []TensorSpec {
	a := &c.Architecture
	H := a.HiddenSize
	var out []TensorSpec
	add := func(name string, class string, small bool, shape ...int) {
		out = append(out, TensorSpec{Name: name, Shape: shape, Class: class, Small: small})
	}
	add("embed", ClassEmbeddings, false, a.VocabSize, H)
	for l := 0; l < a.NumLayers; l++ {
		lt := func(role string) string { return LayerTensor(l, role) }
		add(lt("attn_norm"), ClassTrunk, true, H)
		switch a.LayerTypes[l] {
		case LayerLinearAttention:
			g := a.LinearAttention
			add(lt("gdn.qkvz"), ClassTrunk, false, 2*g.KeyDim()+2*g.ValueDim(), H)
			add(lt("gdn.ba"), ClassTrunk, false, 2*g.NumValueHeads, H)
			add(lt("gdn.conv"), ClassTrunk, true, g.ConvDim(), g.ConvKernel)
			add(lt("gdn.a_log"), ClassTrunk, true, g.NumValueHeads)
			add(lt("gdn.dt_bias"), ClassTrunk, true, g.NumValueHeads)
			add(lt("gdn.norm"), ClassTrunk, true, g.ValueHeadDim)
			add(lt("gdn.out"), ClassTrunk, false, H, g.ValueDim())
		case LayerFullAttention:
			at := a.Attention
			qRows := at.NumHeads * at.HeadDim
			if at.OutputGate {
				qRows *= 2
			}
			add(lt("attn.q"), ClassTrunk, false, qRows, H)
			add(lt("attn.k"), ClassTrunk, false, at.NumKVHeads*at.HeadDim, H)
			add(lt("attn.v"), ClassTrunk, false, at.NumKVHeads*at.HeadDim, H)
			add(lt("attn.o"), ClassTrunk, false, H, at.NumHeads*at.HeadDim)
			add(lt("attn.q_norm"), ClassTrunk, true, at.HeadDim)
			add(lt("attn.k_norm"), ClassTrunk, true, at.HeadDim)
		}
		add(lt("ffn_norm"), ClassTrunk, true, H)
		m := a.MoE
		add(lt("moe.router"), ClassTrunk, false, m.NumExperts, H)
		add(lt("moe.experts.gate"), ClassExperts, false, m.NumExperts, m.IntermediateSize, H)
		add(lt("moe.experts.up"), ClassExperts, false, m.NumExperts, m.IntermediateSize, H)
		add(lt("moe.experts.down"), ClassExperts, false, m.NumExperts, H, m.IntermediateSize)
		if m.SharedExpertIntermediateSize > 0 {
			add(lt("moe.shared.gate"), ClassTrunk, false, m.SharedExpertIntermediateSize, H)
			add(lt("moe.shared.up"), ClassTrunk, false, m.SharedExpertIntermediateSize, H)
			add(lt("moe.shared.down"), ClassTrunk, false, H, m.SharedExpertIntermediateSize)
			add(lt("moe.shared_gate"), ClassTrunk, true, 1, H)
		}
	}
	add("final_norm", ClassTrunk, true, H)
	add("head", ClassHead, false, a.VocabSize, H)
	return out
}
