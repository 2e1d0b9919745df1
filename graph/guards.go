package graph

import (
	"fmt"
	"slices"
)

// Limits are the hardware limits a window graph is generated against.
type Limits struct {
	// MaxThreadsPerThreadgroup is the pipeline limit on threads per
	// threadgroup (1024 on Apple GPUs; a pipeline may report less).
	MaxThreadsPerThreadgroup int
	// MaxThreadgroupsPerGrid bounds the threadgroups of one dispatch. Apple
	// GPUs have been seen to skip threadgroups silently past ~5.4e7, so
	// larger dispatches are split into chunks instead.
	MaxThreadgroupsPerGrid int64
	// MaxBufferBindings is the size of the buffer argument table (31 on
	// Metal, also the most an indirect compute command can bind).
	MaxBufferBindings int
}

// DefaultLimits are the limits of the Apple GPUs strata targets.
var DefaultLimits = Limits{MaxThreadsPerThreadgroup: 1024, MaxThreadgroupsPerGrid: 1 << 25, MaxBufferBindings: 31}

// Grid offset constants of a chunked dispatch: the threadgroup position of the
// chunk's first threadgroup in the dispatch's original grid. A kernel adds
// them to threadgroup_position_in_grid, and must not rely on
// threadgroups_per_grid, which describes the chunk. Every chunk of a split
// dispatch carries all three (zeros included), so its pipelines differ only
// in these values.
const (
	ConstGridOffsetX ConstName = "grid_offset_x"
	ConstGridOffsetY ConstName = "grid_offset_y"
	ConstGridOffsetZ ConstName = "grid_offset_z"
)

// GridOffset returns the chunk offset of a dispatch and whether it is a chunk
// of a split dispatch at all. A backend that runs a dispatch as a whole, not
// per threadgroup (the cpu backend), runs the chunk at offset zero for the
// entire grid and skips the others.
func (d *Dispatch) GridOffset() (offset [3]int, chunked bool) {
	for a, name := range []ConstName{ConstGridOffsetX, ConstGridOffsetY, ConstGridOffsetZ} {
		if v, ok := d.Const(name); ok {
			offset[a] = int(v)
			chunked = true
		}
	}
	return offset, chunked
}

// GuardError is a dispatch that breaks a hardware limit.
type GuardError struct {
	Dispatch int // index in the dispatch list it was found in
	Kernel   string
	Layer    int
	Problem  string
}

func (e *GuardError) Error() string {
	return fmt.Sprintf("dispatch %d (%s, layer %d): %s", e.Dispatch, e.Kernel, e.Layer, e.Problem)
}

// CheckGuards returns a GuardError for the first dispatch whose threadgroup
// is empty or too large, whose grid is empty, or that binds more buffers than
// the argument table holds (its argument struct, when it has scalars, takes
// the slot after its bindings) or one slot twice. Oversized grids are not an
// error: ChunkGrids splits them.
func CheckGuards(ds []Dispatch, lim Limits) error {
	for i := range ds {
		d := &ds[i]
		fail := func(format string, args ...any) error {
			return &GuardError{Dispatch: i, Kernel: d.Kernel, Layer: d.Layer, Problem: fmt.Sprintf(format, args...)}
		}
		threads := int64(1)
		for _, t := range d.Threadgroup {
			if t < 1 {
				return fail("threadgroup %v has an empty dimension", d.Threadgroup)
			}
			threads *= int64(t)
		}
		if threads > int64(lim.MaxThreadsPerThreadgroup) {
			return fail("%d threads per threadgroup %v, the pipeline limit is %d", threads, d.Threadgroup, lim.MaxThreadsPerThreadgroup)
		}
		for _, n := range d.Grid {
			if n < 1 {
				return fail("grid %v has an empty dimension", d.Grid)
			}
		}
		if n := len(d.Args); n > lim.MaxBufferBindings {
			return fail("%d buffer bindings, the limit is %d", n, lim.MaxBufferBindings)
		}
		if len(d.Scalars) > 0 && argsSlot(d) >= lim.MaxBufferBindings {
			return fail("no slot left for the argument struct after %d buffer bindings, the limit is %d", len(d.Args), lim.MaxBufferBindings)
		}
		used := map[int]string{}
		for _, b := range d.Args {
			if b.Slot < 0 || b.Slot >= lim.MaxBufferBindings {
				return fail("binding %s at slot %d, slots are 0…%d", b.Name, b.Slot, lim.MaxBufferBindings-1)
			}
			if other, dup := used[b.Slot]; dup {
				return fail("bindings %s and %s share slot %d", other, b.Name, b.Slot)
			}
			used[b.Slot] = b.Name
		}
	}
	return nil
}

func gridSize(grid [3]int) int64 { return int64(grid[0]) * int64(grid[1]) * int64(grid[2]) }

// ChunkGrids splits every dispatch of more than lim.MaxThreadgroupsPerGrid
// threadgroups into chunks over sub-grids, each with the grid offset
// constants, and moves the host points to the last chunk of their router. The
// chunks keep the dispatch's ranges (which threadgroup touches which byte is
// the kernel's business), so the barrier rule orders them like any dispatches
// that share ranges. It returns how many dispatches were split.
func ChunkGrids(g *Graph, lim Limits) int {
	split := 0
	var out []Dispatch
	newIndex := make([]int, len(g.Dispatches)) // last chunk of each old dispatch
	for i, d := range g.Dispatches {
		if gridSize(d.Grid) <= lim.MaxThreadgroupsPerGrid {
			out = append(out, d)
		} else {
			split++
			base, _ := d.GridOffset() // a chunk split again keeps its place in the original grid
			out = appendChunks(out, d, base, lim.MaxThreadgroupsPerGrid)
		}
		newIndex[i] = len(out) - 1
	}
	if split == 0 {
		return 0
	}
	for k := range g.HostPoints {
		if a := g.HostPoints[k].After; a >= 0 && a < len(newIndex) {
			g.HostPoints[k].After = newIndex[a]
		}
	}
	g.Dispatches = out
	return split
}

// appendChunks splits d along its outermost non-trivial axis: into slabs that
// fit when the axes inside fit, else into unit slices that are split further.
func appendChunks(out []Dispatch, d Dispatch, base [3]int, limit int64) []Dispatch {
	if gridSize(d.Grid) <= limit {
		c := d
		c.Consts = slices.DeleteFunc(slices.Clone(d.Consts), func(k Const) bool {
			return k.Name == ConstGridOffsetX || k.Name == ConstGridOffsetY || k.Name == ConstGridOffsetZ
		})
		c.Consts = append(c.Consts,
			Const{Name: ConstGridOffsetX, Value: int64(base[0])},
			Const{Name: ConstGridOffsetY, Value: int64(base[1])},
			Const{Name: ConstGridOffsetZ, Value: int64(base[2])})
		return append(out, c)
	}
	axis := 2
	for d.Grid[axis] == 1 {
		axis--
	}
	inner := int64(1)
	for a := 0; a < axis; a++ {
		inner *= int64(d.Grid[a])
	}
	step := 1
	if inner <= limit {
		step = int(limit / inner)
	}
	for at := 0; at < d.Grid[axis]; at += step {
		c := d
		c.Grid[axis] = min(step, d.Grid[axis]-at)
		off := base
		off[axis] += at
		out = appendChunks(out, c, off, limit)
	}
	return out
}
