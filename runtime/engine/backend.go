package engine

import (
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// window is a compiled window graph.
type window struct {
	g *graph.Graph
	p backend.Program
}
