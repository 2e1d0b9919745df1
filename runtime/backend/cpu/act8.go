package cpu

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/strata-llm/strata/models/quant"
)

// Integer dots (quant.Act8): the matmuls and expert products whose weights
// have an integer kernel quantize their activation rows to int8 blocks of
// 32 once (as ggml quantizes activations to q8 before its vec_dot), with
// one scale per block, or per 256 values where the formats' multi-row
// kernels run fastest so (Act8Dot.Scale256: q4_k, q5_k and the IQ formats
// with a scale per 32, as ggml's q8_K), and multiply them with the stored
// blocks in integers. The results differ from the float32-activation path
// by the activations' rounding (within Σ|w|·D/2 per block of 32, D the
// block's or its 256's scale; quant.Act8 documents it).
// SetIntegerDots(false) keeps every product on float32 activations.
var integerDots atomic.Bool

// STRATA_INTEGER_DOTS=0 in the environment starts with the path off (for
// side-by-side measurements of the two paths).
func init() { integerDots.Store(os.Getenv("STRATA_INTEGER_DOTS") != "0") }

// SetIntegerDots turns the integer-dot path on (the default) or off.
func SetIntegerDots(on bool) { integerDots.Store(on) }

// IntegerDots reports whether the integer-dot path is on.
func IntegerDots() bool { return integerDots.Load() }

// act8Kernel is m's integer kernel when the path is on and m's format has one.
func (m matrix) act8Kernel() (quant.Act8Dot, bool) {
	if !integerDots.Load() {
		return quant.Act8Dot{}, false
	}
	return m.rl.Act8Kernel()
}

var act8Rows = sync.Pool{New: func() any { return new(quant.Act8Rows) }}

// quantizeRows quantizes rows x[t·k : (t+1)·k], t < rows, on the calling
// goroutine (1.1 µs per 2048 values with the AVX2 quantizer, 6.5 µs in Go,
// here: a few percent of a dispatch at most), with one scale per 256
// values where wide (quant.Act8.Quantize256: the kernels of
// Act8Dot.Scale256 formats), else per 32; put the result back in act8Rows.
func quantizeRows(x []float32, rows, k int, wide bool) *quant.Act8Rows {
	ar := act8Rows.Get().(*quant.Act8Rows)
	if wide {
		ar.Quantize256(x, rows, k)
	} else {
		ar.Quantize(x, rows, k)
	}
	return ar
}

// matmulRowsAct8 is matmulRows through the integer kernel k8: the rows are
// quantized once, then each weight row meets them eight or four at a time
// (act8Tile).
func matmulRowsAct8(pl *pool, w matrix, k8 quant.Act8Dot, x, y []float32, rows int) {
	n, k := w.rows, w.cols
	ar := quantizeRows(x, rows, k, k8.Scale256())
	defer act8Rows.Put(ar)
	block := max(8, min(rows, xBlockBytes/k)/8*8)
	pl.parallel(n, k*rows, func(lo, hi int) {
		if rows < 4 { // decode: each activation row meets the weight rows in one call
			for t := range rows {
				k8.DotRows(w.data[lo*w.rowBytes:hi*w.rowBytes], w.rowBytes, ar.Row(t), y[t*n+lo:t*n+hi])
			}
			return
		}
		yoff := make([]int, block)
		for t0 := 0; t0 < rows; t0 += block {
			t1 := min(rows, t0+block)
			for t := t0; t < t1; t++ {
				yoff[t-t0] = t * n
			}
			act8Tile(k8, w, lo, hi, ar, t0, y, yoff[:t1-t0])
		}
	})
}

// act8Tile sets y[yoff[t]+i] to weight row i of m · activation row r0+t of
// ar, for i in [lo, hi) and t < len(yoff), in tiles of tileWeights weight
// rows × eight or four activation rows: the rows meet each weight row of
// the tile in one eight-row or four-row kernel call (its blocks loaded and
// decoded once for them), and stay in the core's first-level cache while
// the tile's weight rows (in the second) go by, so the activations are not
// streamed again for every weight row. A tail borrows rows of ar beside
// the group to fill a kernel and drops their results where that costs
// less than smaller calls (tilePlan).
func act8Tile(k8 quant.Act8Dot, m matrix, lo, hi int, ar *quant.Act8Rows, r0 int, y []float32, yoff []int) {
	var planBuf [16]tileCall
	plan := tilePlan(k8, len(yoff), r0, ar.Rows(), planBuf[:0])
	var out [tileWeights][8]float32
	var out4 [tileWeights][4]float32
	var out2 [tileWeights][2]float32
	var eight [8]*quant.Act8
	var four [4]*quant.Act8
	for i0 := lo; i0 < hi; i0 += tileWeights {
		i1 := min(hi, i0+tileWeights)
		data := m.data[i0*m.rowBytes : i1*m.rowBytes]
		for _, c := range plan {
			switch c.width {
			case 8:
				for r := range eight {
					eight[r] = ar.Row(r0 + c.start + r)
				}
				k8.DotRows8(data, m.rowBytes, &eight, out[:i1-i0])
				scatterTile(out[:i1-i0], c, y, yoff, i0)
			case 4:
				for r := range four {
					four[r] = ar.Row(r0 + c.start + r)
				}
				k8.DotRows4(data, m.rowBytes, &four, out4[:i1-i0])
				scatterTile(out4[:i1-i0], c, y, yoff, i0)
			case 2:
				two := [2]*quant.Act8{ar.Row(r0 + c.start), ar.Row(r0 + c.start + 1)}
				k8.DotRows2(data, m.rowBytes, &two, out2[:i1-i0])
				scatterTile(out2[:i1-i0], c, y, yoff, i0)
			default:
				t := c.from
				k8.DotRows(data, m.rowBytes, ar.Row(r0+t), y[yoff[t]+i0:yoff[t]+i1])
			}
		}
	}
}

// scatterTile writes the rows [c.from, c.to) of a call's results o (weight
// row i0+i, activation row c.start+r in o[i][r]) to y at yoff.
func scatterTile[R [2]float32 | [4]float32 | [8]float32](o []R, c tileCall, y []float32, yoff []int, i0 int) {
	for t := c.from; t < c.to; t++ {
		yr := y[yoff[t]+i0 : yoff[t]+i0+len(o)]
		for i := range yr {
			yr[i] = o[i][t-c.start]
		}
	}
}

// tileCall is one kernel call of act8Tile: the group's activation rows
// [start, start+width) (width 8, 4, 2 or 1; rows outside the group borrowed
// from ar), of which it writes the rows [from, to).
type tileCall struct{ start, width, from, to int }

// tilePlan splits a group of rows activation rows at r0 of total rows
// into act8Tile's kernel calls, appended to plan: eight-row calls while
// eight rows remain (where the format has the kernel), then four-row ones,
// then the tail. A tail of Tail8 to seven rows (five for the grid IQ
// formats, seven for q8_0, q4_k and q5_k, whose small calls cost less
// against their eight-row one) takes one more eight-row call, a tail of
// three one more four-row call, borrowing rows before the tail (the
// group's own, or ar's before r0) or else after the group, where ar has
// them; two rows left take a two-row call (where the format has one), the
// rest one-row calls. On iq2_xxs (2048 values, L1, this EPYC) one
// eight-row call costs 527 ns, a four-row one 345, a two-row one 223 and
// a one-row one 177.
func tilePlan(k8 quant.Act8Dot, rows, r0, total int, plan []tileCall) []tileCall {
	t := 0
	// borrow appends a call of width w covering the rows [t, rows), if ar
	// has the rows to fill it.
	borrow := func(w int) bool {
		s := rows - w
		if r0+s < 0 {
			s = t
			if r0+s+w > total {
				return false
			}
		}
		plan = append(plan, tileCall{start: s, width: w, from: t, to: rows})
		t = rows
		return true
	}
	if k8.HasDot8() {
		for ; t+8 <= rows; t += 8 {
			plan = append(plan, tileCall{start: t, width: 8, from: t, to: t + 8})
		}
		if rows-t >= k8.Tail8() && borrow(8) {
			return plan
		}
	}
	if k8.HasDot4() {
		for ; t+4 <= rows; t += 4 {
			plan = append(plan, tileCall{start: t, width: 4, from: t, to: t + 4})
		}
		if rows-t == 3 && borrow(4) {
			return plan
		}
	}
	if k8.HasDot2() && rows-t >= 2 {
		plan = append(plan, tileCall{start: t, width: 2, from: t, to: t + 2})
		t += 2
	}
	for ; t < rows; t++ {
		plan = append(plan, tileCall{start: t, width: 1, from: t, to: t + 1})
	}
	return plan
}

// tileSpare is how many rows past a group of rows rows (gathered on their
// own for act8Tile) let tilePlan fill a kernel for its tail: Tail8 to seven
// rows borrow up to eight for an eight-row kernel, three a fourth for a
// four-row kernel (groups of more rows borrow their own rows).
func tileSpare(rows int, k8s ...quant.Act8Dot) int {
	for _, k := range k8s {
		if k.HasDot8() && rows >= k.Tail8() && rows < 8 {
			return 8 - rows
		}
	}
	if rows == 3 {
		return 1
	}
	return 0
}

// tileWeights is act8Tile's tile height: 16 weight rows of 2048 values
// (18 to 34 KiB in the formats at hand) stay in the second-level cache
// while eight activation rows (16 KiB) stay in the first.
const tileWeights = 16

// actRows are a window's activation rows (rows of k in x, or the rows
// sel[i] of x in that order) as one product with weight rows of given
// layouts takes them: quantized once when every layout has an integer
// kernel (and the path is on), else float32.
type actRows struct {
	x   []float32
	k   int
	sel []int // nil: row i is x's row i
	ar  *quant.Act8Rows
	k8  []quant.Act8Dot // per layout, in the order given
}

func newActRows(x []float32, rows, k int, layouts ...quant.RowLayout) actRows {
	a, ok := actKernels(x, k, layouts)
	if ok {
		a.ar = quantizeRows(x, rows, k, a.wide())
	}
	return a
}

// newActRowsSel is newActRows for the rows sel[i] of x, in that order (the
// rows of one expert then lie at one stride for the four-row kernels).
func newActRowsSel(x []float32, sel []int, k int, layouts ...quant.RowLayout) actRows {
	a, ok := actKernels(x, k, layouts)
	a.sel = sel
	if ok {
		a.ar = act8Rows.Get().(*quant.Act8Rows)
		if a.wide() {
			a.ar.QuantizeSel256(x, k, sel)
		} else {
			a.ar.QuantizeSel(x, k, sel)
		}
	}
	return a
}

// wide reports whether every layout's kernels take rows with one scale
// per 256 values fastest (Act8Dot.Scale256): the rows are then quantized
// so (every kernel takes them; the rounding is ggml's q8_K's).
func (a actRows) wide() bool {
	for _, k := range a.k8 {
		if !k.Scale256() {
			return false
		}
	}
	return len(a.k8) > 0
}

// actKernels is actRows without its quantized rows, the integer kernels
// of layouts found where the path is on and every layout has one (ok).
func actKernels(x []float32, k int, layouts []quant.RowLayout) (actRows, bool) {
	a := actRows{x: x, k: k}
	if !integerDots.Load() {
		return a, false
	}
	for _, rl := range layouts {
		k8, ok := rl.Act8Kernel()
		if !ok {
			return actRows{x: x, k: k}, false
		}
		a.k8 = append(a.k8, k8)
	}
	return a, true
}

// dotRows sets out[i] to row lo+i of m (of the l-th layout) · activation
// row t, for i < len(out); through one call where the rows are quantized.
func (a actRows) dotRows(m matrix, l, lo, t int, out []float32) {
	if a.ar != nil {
		a.k8[l].DotRows(m.data[lo*m.rowBytes:(lo+len(out))*m.rowBytes], m.rowBytes, a.ar.Row(t), out)
		return
	}
	if a.sel != nil {
		t = a.sel[t]
	}
	for i := range out {
		out[i] = m.dotRow(lo+i, a.x[t*a.k:(t+1)*a.k])
	}
}

// tileRows is the least number of a window's rows routed to one expert
// that go through act8Tile (two-, four- and eight-row kernels) rather than
// dotRows; a single row (decode) takes the one-row call.
const tileRows = 2

// release returns the quantized rows to the pool.
func (a actRows) release() {
	if a.ar != nil {
		act8Rows.Put(a.ar)
	}
}
