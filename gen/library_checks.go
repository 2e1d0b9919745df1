package gen

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
)

// checkWeightFormats verifies that float bindings of weight buffers bind f32
// tensors and formatted bindings bind tensors of the kernel's format.
func checkWeightFormats(k *Kernel, d *graph.Dispatch, g *graph.Graph, tensors map[graph.Range]graph.Tensor) error {
	for _, a := range d.Args {
		buf, _ := g.Buffer(a.Buffer)
		if buf.Kind != graph.KindWeights && buf.Kind != graph.KindExperts {
			continue
		}
		want := "f32"
		if k.Family.formatted(a.Name) {
			want = k.Format
		}
		// Every tensor inside the bound range (experts bind gate, up and down).
		found := false
		for i := range g.Tensors {
			// By pointer: this runs over every tensor for every binding, and
			// a copy of each is most of a library's build under -race.
			t := &g.Tensors[i]
			if t.Buffer != a.Buffer || t.Offset < a.Offset || t.Offset >= a.End() {
				continue
			}
			found = true
			if t.Format != want {
				return fmt.Errorf("binding %s reads tensor %s stored as %s, kernel %s reads %s", a.Name, t.Name, t.Format, k.Name, want)
			}
		}
		if !found {
			if _, ok := tensors[graph.Range{Buffer: a.Buffer, Offset: a.Offset}]; !ok {
				return fmt.Errorf("binding %s at %s+%d starts at no tensor", a.Name, a.Buffer, a.Offset)
			}
		}
	}
	return nil
}

// expertParts are the parts of an expert block each expert family decodes,
// by the function constant that places them in the block.
var expertParts = map[graph.Family][]graph.ConstName{graph.FamilyMoEGateUp: {graph.ConstGateOff, graph.ConstUpOff}, graph.FamilyMoEDown: {graph.ConstDownOff}}

// checkExpertParts verifies that the expert parts a kernel decodes are
// stored in its format: moe_gate_up is named by gate and up's format,
// moe_down by down's, which a row policy may store differently
// (Qwen3.8-Flash-Next's 640-wide down rows fall back to iq4_nl under
// rows=fallback while gate and up stay iq2_xs). A kernel that would misread
// a part is left out.
func checkExpertParts(k *Kernel, d *graph.Dispatch, gates map[int]graph.Tensor, tensors map[graph.Range]graph.Tensor) error {
	gate, ok := gates[d.Layer]
	if !ok {
		return nil
	}
	for _, part := range expertParts[k.Family.Name] {
		off, _ := d.Const(part)
		t, ok := tensors[graph.Range{Buffer: gate.Buffer, Offset: gate.Offset + off}]
		if ok && t.Format != k.Format {
			return fmt.Errorf("%s decodes tensor %s as %s, but it is stored as %s", k.Name, t.Name, k.Format, t.Format)
		}
	}
	return nil
}

// checkChunks verifies that the rows a formatted kernel decodes are whole
// decoder chunks (the kernels have no tail path yet).
func checkChunks(f *Family, d *graph.Dispatch, format string, chunk int) error {
	var lens []graph.ConstName
	switch f.Name {
	case graph.FamilyEmbed:
		lens = []graph.ConstName{graph.ConstDim}
	case graph.FamilyMatmul:
		lens = []graph.ConstName{graph.ConstK}
	case graph.FamilyMoEGateUp:
		lens = []graph.ConstName{graph.ConstHidden}
	case graph.FamilyMoEDown:
		lens = []graph.ConstName{graph.ConstInter}
	}
	for _, name := range lens {
		v, _ := d.Const(name)
		if v%int64(chunk) != 0 {
			return fmt.Errorf("%s rows of %d elements are not whole %s decoder chunks of %d (a tail path is needed)", f.Name, v, format, chunk)
		}
	}
	return nil
}

// checkFits verifies that a dispatch's sizes fit the arrays the kernels size
// with baked constants.
func checkFits(f *Family, d *graph.Dispatch, baked []BakedConst) error {
	bv := func(name string) int64 {
		for _, b := range baked {
			if b.Name == name {
				return int64(b.Value)
			}
		}
		panic("gen: no baked constant " + name)
	}
	c := func(name graph.ConstName) int64 { v, _ := d.Const(name); return v }
	type limit struct {
		what       string
		have, most int64
	}
	var limits []limit
	switch f.Name {
	case graph.FamilyGDNConv:
		limits = append(limits, limit{"conv kernel", c(graph.ConstKernel), bv("gdn_conv_window")})
	case graph.FamilyGDNRule:
		limits = append(limits, limit{"key head dim", c(graph.ConstDK), simdWidth * bv("gdn_rule_rows_per_lane")})
	case graph.FamilyAttention:
		limits = append(limits, limit{"head dim", c(graph.ConstHeadDim), simdWidth * bv("attn_dims_per_lane")})
	case graph.FamilyRouter:
		limits = append(limits, limit{"experts", c(graph.ConstExperts), simdWidth * bv("router_experts_per_lane")})
	case graph.FamilyPLEConv:
		limits = append(limits, limit{"conv window", (c(graph.ConstKernel)-1)*c(graph.ConstDilation) + 1, bv("ple_conv_window")})
	case graph.FamilyIndexPool:
		limits = append(limits, limit{"head dim", c(graph.ConstHeadDim), bv("index_head_dim_max")})
	case graph.FamilyIndexSelect:
		limits = append(limits, limit{"query size", c(graph.ConstHeads) * c(graph.ConstHeadDim), bv("index_query_max")},
			limit{"top-k", c(graph.ConstTopK), 1<<32 - 2})
	}
	for _, l := range limits {
		if l.have > l.most || l.have < 0 {
			return fmt.Errorf("%s %d is more than the %d the kernel was generated for", l.what, l.have, l.most)
		}
	}
	return nil
}
