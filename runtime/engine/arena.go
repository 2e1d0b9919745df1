package engine

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
)

// ExpertSlots is what sizing an expert arena needs: the bytes of one arena
// slot (an expert's gate, up and down, page-aligned), the number of routed
// experts in all, and the bytes of every other buffer (trunk weights,
// caches, state, scratch) the graphs allocate.
func ExpertSlots(c *models.Config, graphs []*graph.Graph) (slotBytes int64, experts int, other int64, err error) {
	layout, err := expertLayout(c, graphs[0])
	if err != nil {
		return 0, 0, 0, err
	}
	bufs, err := backend.Layout(graphs...)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("model %s: %w", c.Name, err)
	}
	for _, b := range bufs {
		if b.Kind != graph.KindExperts && b.Kind != graph.KindMapped {
			other += b.Size
		}
	}
	return layout.slotBytes, layout.layers * c.Architecture.MoE.NumExperts, other, nil
}
