package engine

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/sysmem"
)

// hostMemory is the machine's memory; a variable so tests can shrink it.
var hostMemory = sysmem.Read

// checkMemory refuses, before anything is allocated, graphs whose buffers
// need more memory than the machine has available: a --context or an arena
// too large for it is a named error, not an out-of-memory crash. Sizes are
// summed over backend.Layout, as every backend allocates them (each buffer
// at its largest; file mappings not counted).
func checkMemory(c *models.Config, graphs []*graph.Graph) error {
	for _, g := range graphs {
		for _, b := range g.Buffers {
			if b.Size < 0 {
				return fmt.Errorf("model %s: buffer %s overflows (%d bytes): a size asked for is too large", c.Name, b.Name, b.Size)
			}
		}
	}
	layout, err := backend.Layout(graphs...)
	if err != nil {
		return fmt.Errorf("model %s: %w", c.Name, err)
	}
	byKind := map[string]float64{}
	total := 0.0
	for k, v := range bytesByKind(layout) {
		byKind[k] = float64(v)
		total += float64(v)
	}
	info, err := hostMemory()
	if err != nil {
		if total > math.MaxInt/2 {
			return fmt.Errorf("model %s: buffers of %.3g bytes cannot be allocated", c.Name, total)
		}
		return nil // no bound known: the allocation itself decides
	}
	if total <= float64(info.Available) {
		return nil
	}
	var parts []string
	for k, v := range byKind {
		parts = append(parts, fmt.Sprintf("%s %s", k, sysmem.Size(uint64(v))))
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	hint := ""
	switch largest(byKind) {
	case graph.KindCache:
		hint = fmt.Sprintf("; the KV and index caches hold %d positions: lower --context", c.Runtime.ContextLength)
	case graph.KindExperts:
		hint = "; the routed experts do not fit: stream them (--arena-gb, or a smaller --arena-experts)"
	case graph.KindWeights:
		hint = "; the weights do not fit: use a GGUF (its weights stay in the mapped file) or a smaller quant plan"
	}
	return fmt.Errorf("model %s needs %s of host memory for its buffers (%s), %s is available to it (per %s)%s",
		c.Name, sysmem.Size(uint64(total)), strings.Join(parts, ", "), sysmem.Size(info.Available), info.Source, hint)
}

func largest(m map[string]float64) string {
	best, bv := "", -1.0
	for k, v := range m {
		if v > bv || v == bv && k < best {
			best, bv = k, v
		}
	}
	return best
}

// BufferBytes is the memory the model's buffers take, by graph buffer kind
// (weights, experts: the arena when streamed, cache, state, scratch, …),
// as checkMemory sums it; file mappings are not counted.
func (m *Model) BufferBytes() map[string]int64 {
	var graphs []*graph.Graph
	for _, w := range m.programs {
		graphs = append(graphs, w.g)
	}
	for _, w := range m.mtp {
		graphs = append(graphs, w.g)
	}
	layout, err := backend.Layout(graphs...)
	if err != nil {
		return nil
	}
	return bytesByKind(layout)
}

// bytesByKind sums a layout's buffers by kind, file mappings left out
// (file memory, not allocated).
func bytesByKind(layout []graph.Buffer) map[string]int64 {
	out := map[string]int64{}
	for _, b := range layout {
		if b.Kind != graph.KindMapped {
			out[b.Kind] += b.Size
		}
	}
	return out
}
