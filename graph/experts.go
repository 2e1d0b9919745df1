package graph

import "fmt"

// ExpertGates maps each MoE layer, numbered as the dispatches number them
// (trunk layers 0…L−1, then the MTP layers), to the placement of its routed
// experts' gate tensor: where each expert block of the layer starts. The
// role names are the generator's ("layers.N.moe.experts.gate",
// "mtp.layers.N.moe.experts.gate").
func ExpertGates(ts []Tensor) map[int]Tensor {
	out := map[int]Tensor{}
	trunk := 0
	for _, t := range ts {
		var l int
		if n, err := fmt.Sscanf(t.Name, "layers.%d.moe.experts.gate", &l); err == nil && n == 1 {
			out[l] = t
			trunk = max(trunk, l+1)
		}
	}
	for _, t := range ts {
		var i int
		if n, err := fmt.Sscanf(t.Name, "mtp.layers.%d.moe.experts.gate", &i); err == nil && n == 1 {
			out[trunk+i] = t
		}
	}
	return out
}
