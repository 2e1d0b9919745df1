package graph

import "fmt"

// Optimize runs the window-graph passes with the default hardware limits; see
// OptimizeWith.
func Optimize(g *Graph) error { return OptimizeWith(g, DefaultLimits) }

// Pass is one step of the optimizer: a name a reader, a test or a debug
// listing can use, and what it does to the graph under the limits.
type Pass struct {
	Name string
	Fn   func(g *Graph, lim Limits) error
	// Required passes make the graph runnable; the others only make it
	// faster (a graph without them is still correct on every backend).
	Required bool
}

// Passes is the optimizer's pipeline, in the order OptimizeWith runs it.
var Passes = []Pass{
	{Name: "guards", Fn: guardsPass, Required: true},          // hardware limits, naming the offending dispatch
	{Name: "host points", Fn: hostPointsPass, Required: true}, // ascending and inside the dispatch list
	{Name: "chunk grids", Fn: chunkGridsPass, Required: true}, // oversized grids split into chunks
	{Name: "reorder", Fn: reorderPass, Required: true},        // independent work shares a barrier group; places the host waits
	{Name: "place barriers", Fn: placeBarriersPass, Required: true},
	{Name: "plan icb", Fn: planICBPass, Required: true}, // the replay plan of the final order
}

func guardsPass(g *Graph, lim Limits) error {
	if err := CheckGuards(g.Dispatches, lim); err != nil {
		return fmt.Errorf("graph %s/T=%d: %w", g.Model, g.Rows, err)
	}
	return nil
}

func hostPointsPass(g *Graph, _ Limits) error { return g.checkHostPoints() }

func chunkGridsPass(g *Graph, lim Limits) error {
	ChunkGrids(g, lim)
	return nil
}

func reorderPass(g *Graph, _ Limits) error { return Reorder(g) }

func placeBarriersPass(g *Graph, _ Limits) error {
	PlaceBarriers(g.Dispatches)
	return nil
}

func planICBPass(g *Graph, _ Limits) error {
	g.ICB = PlanICB(g)
	return nil
}

// OptimizeWith prepares a freshly built graph for every backend by running
// Passes in order: it checks the hardware guards (naming the offending
// dispatch) and the host points, splits oversized grids into chunks,
// reorders the dispatches so independent work shares a barrier group
// (Reorder), places the barriers by the simple rule on the new order
// (PlaceBarriers) and records the ICB replay plan. Running it again on its
// own output changes nothing.
func OptimizeWith(g *Graph, lim Limits) error {
	if lim.MaxThreadsPerThreadgroup < 1 || lim.MaxThreadgroupsPerGrid < 1 || lim.MaxBufferBindings < 1 {
		return fmt.Errorf("graph %s/T=%d: limits %+v must all be positive", g.Model, g.Rows, lim)
	}
	for _, p := range Passes {
		if err := p.Fn(g, lim); err != nil {
			return err
		}
	}
	return nil
}
