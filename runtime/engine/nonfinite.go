package engine

import (
	"fmt"
	"math"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// firstNonFinite says, after a window whose logits were not finite, which
// layer first holds non-finite values in what persists per layer: its
// recurrent or convolution state and its KV or index caches (f32 in every
// generated model), scanned in dispatch order. The scratch activations are
// overwritten layer after layer, so they cannot say. It runs only after the
// fact, once, and reads at most the state and the caches.
func (m *Model) firstNonFinite(mem backend.Memory, g *graph.Graph) string {
	kinds := map[string]string{}
	for _, b := range g.Buffers {
		if b.Kind == graph.KindState || b.Kind == graph.KindCache {
			kinds[b.Name] = b.Kind
		}
	}
	checked := map[graph.Range]bool{}
	for _, d := range g.Dispatches {
		if d.Layer < 0 {
			continue
		}
		for _, a := range d.Args {
			kind, ok := kinds[a.Buffer]
			if !ok || a.Access == graph.Read || checked[a.Range] {
				continue
			}
			checked[a.Range] = true
			b, err := mem.Bytes(a.Range)
			if err != nil {
				continue
			}
			for _, v := range backend.Float32s(b[:len(b)/4*4]) {
				if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
					what := "state"
					if kind == graph.KindCache {
						what = "cache"
					}
					before := "the layer before"
					if d.Layer == 0 {
						before = "the token embedding"
					}
					return fmt.Sprintf("; layer %d is the first whose %s (%s, written by %s) is non-finite: the fault is in it or in %s", d.Layer, what, a.Name, d.Family, before)
				}
			}
		}
	}
	return ""
}
