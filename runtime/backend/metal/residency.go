package metal

import "github.com/strata-llm/strata/graph"

// Residency is the host side of a host point, implemented by the expert
// streaming loop. When the GPU has run a layer's router (dispatch hp.After)
// it signals the host; the backend calls MakeResident on its spinning
// thread, and releases the GPU's wait (before dispatch hp.Wait) when it
// returns. The router's output is in the window's shared memory, readable in
// place. MakeResident must not block on anything the GPU does later in the
// window. An error still releases the GPU (a waiting command buffer cannot be
// cancelled); the window then fails with it.
type Residency interface {
	MakeResident(g *graph.Graph, hp graph.HostPoint) error
}

// NoResidency is the hook for a model whose experts all stay resident.
type NoResidency struct{}

// MakeResident does nothing.
func (NoResidency) MakeResident(*graph.Graph, graph.HostPoint) error { return nil }
