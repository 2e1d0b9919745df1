package cpu

import (
	"os"
	"sync"
	"sync/atomic"

	"github.com/strata-llm/strata/models/quant"
)

// Integer dots (quant.Act8): the matmuls and expert products whose weights
// have an integer kernel quantize their activation rows to int8 blocks of
// 32 once (as ggml quantizes activations to q8 before its vec_dot) and
// multiply them with the stored blocks in integers. The results differ
// from the float32-activation path by the activations' rounding (within
// Σ|w|·D/2 per block of 32; quant.Act8 documents it). SetIntegerDots(false)
// keeps every product on float32 activations.
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
// here: a few percent of a dispatch at most); put the
// result back in act8Rows.
func quantizeRows(x []float32, rows, k int) *quant.Act8Rows {
	ar := act8Rows.Get().(*quant.Act8Rows)
	ar.Quantize(x, rows, k)
	return ar
}

// matmulRowsAct8 is matmulRows through the integer kernel k8: the rows are
// quantized once, then each weight row meets them four at a time.
func matmulRowsAct8(pl *pool, w matrix, k8 quant.Act8Dot, x, y []float32, rows int) {
	n, k := w.rows, w.cols
	ar := quantizeRows(x, rows, k)
	defer act8Rows.Put(ar)
	block := max(4, min(rows, xBlockBytes/k)/4*4)
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
// rows × four activation rows: the four rows meet each weight row of the
// tile in one four-row kernel call (its blocks loaded and decoded once for
// the four), and stay in the core's first-level cache while the tile's
// weight rows (in the second) go by, so the activations are not streamed
// again for every weight row. A tail of three rows borrows a fourth (the
// row before, or after where ar holds one) and drops its result: one
// four-row call costs less than three one-row ones.
func act8Tile(k8 quant.Act8Dot, m matrix, lo, hi int, ar *quant.Act8Rows, r0 int, y []float32, yoff []int) {
	rows := len(yoff)
	tail := rows % 4
	borrow := 0 // the tail's four rows start at rows-tail-borrow
	switch {
	case tail != 3 || !k8.HasDot4():
		borrow = -1
	case rows > 3:
		borrow = 1
	case r0+rows >= ar.Rows():
		borrow = -1
	}
	var out [tileWeights][4]float32
	var four [4]*quant.Act8
	for i0 := lo; i0 < hi; i0 += tileWeights {
		i1 := min(hi, i0+tileWeights)
		data := m.data[i0*m.rowBytes : i1*m.rowBytes]
		o := out[:i1-i0]
		quad := func(t, from, to int) {
			for r := range four {
				four[r] = ar.Row(r0 + t + r)
			}
			k8.DotRows4(data, m.rowBytes, &four, o)
			for r := from; r < to; r++ {
				yr := y[yoff[t+r]+i0 : yoff[t+r]+i1]
				for i := range yr {
					yr[i] = o[i][r]
				}
			}
		}
		t := 0
		for ; t+4 <= rows; t += 4 {
			quad(t, 0, 4)
		}
		if borrow >= 0 {
			quad(t-borrow, borrow, borrow+tail)
			continue
		}
		for ; t < rows; t++ {
			k8.DotRows(data, m.rowBytes, ar.Row(r0+t), y[yoff[t]+i0:yoff[t]+i1])
		}
	}
}

// tileWeights is act8Tile's tile height: 16 weight rows of 2048 values
// (18 to 34 KiB in the formats at hand) stay in the second-level cache
// while four activation rows (8 KiB) stay in the first.
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
		a.ar = quantizeRows(x, rows, k)
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
		a.ar.QuantizeSel(x, k, sel)
	}
	return a
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
// that go through act8Tile (four-row kernels) rather than dotRows; below
// it the one-row calls (decode) cost no less.
const tileRows = 3

// release returns the quantized rows to the pool.
func (a actRows) release() {
	if a.ar != nil {
		act8Rows.Put(a.ar)
	}
}
