package graph

import "fmt"

// Optimize runs the window-graph passes with the default hardware limits; see
// OptimizeWith.
func Optimize(g *Graph) error { return OptimizeWith(g, DefaultLimits) }

// OptimizeWith prepares a freshly built graph for every backend: it checks
// the hardware guards (naming the offending dispatch), splits oversized grids
// into chunks, reorders the dispatches so independent work shares a barrier
// group (Reorder), places the barriers by the simple rule on the new order
// (PlaceBarriers) and records the ICB replay plan. Running it again on its
// own output changes nothing.
func OptimizeWith(g *Graph, lim Limits) error {
	if lim.MaxThreadsPerThreadgroup < 1 || lim.MaxThreadgroupsPerGrid < 1 || lim.MaxBufferBindings < 1 {
		return fmt.Errorf("graph %s/T=%d: limits %+v must all be positive", g.Model, g.Rows, lim)
	}
	if err := CheckGuards(g.Dispatches, lim); err != nil {
		return fmt.Errorf("graph %s/T=%d: %w", g.Model, g.Rows, err)
	}
	if err := g.checkHostPoints(); err != nil {
		return err
	}
	ChunkGrids(g, lim)
	if err := Reorder(g); err != nil {
		return err
	}
	PlaceBarriers(g.Dispatches)
	g.ICB = PlanICB(g)
	return nil
}
