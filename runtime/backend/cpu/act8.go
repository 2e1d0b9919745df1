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
// goroutine (3.5 µs per 2048 values: a few percent of a dispatch); put the
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
		var out [4]float32
		var four [4]*quant.Act8
		for t0 := 0; t0 < rows; t0 += block {
			t1 := min(rows, t0+block)
			for i := lo; i < hi; i++ {
				row := w.data[i*w.rowBytes : (i+1)*w.rowBytes]
				t := t0
				for ; t+4 <= t1; t += 4 {
					for r := range four {
						four[r] = ar.Row(t + r)
					}
					k8.Dot4(row, &four, &out)
					for r, v := range out {
						y[(t+r)*n+i] = v
					}
				}
				for ; t < t1; t++ {
					y[t*n+i] = k8.Dot(row, ar.Row(t))
				}
			}
		}
	})
}

// actRows are a window's activation rows (rows of k in x) as one product
// with weight rows of given layouts takes them: quantized once when every
// layout has an integer kernel (and the path is on), else float32.
type actRows struct {
	x  []float32
	k  int
	ar *quant.Act8Rows
	k8 []quant.Act8Dot // per layout, in the order given
}

func newActRows(x []float32, rows, k int, layouts ...quant.RowLayout) actRows {
	a := actRows{x: x, k: k}
	if !integerDots.Load() {
		return a
	}
	for _, rl := range layouts {
		k8, ok := rl.Act8Kernel()
		if !ok {
			return actRows{x: x, k: k}
		}
		a.k8 = append(a.k8, k8)
	}
	a.ar = quantizeRows(x, rows, k)
	return a
}

// dotRows sets out[i] to row lo+i of m (of the l-th layout) · activation
// row t, for i < len(out); through one call where the rows are quantized.
func (a actRows) dotRows(m matrix, l, lo, t int, out []float32) {
	if a.ar != nil {
		a.k8[l].DotRows(m.data[lo*m.rowBytes:(lo+len(out))*m.rowBytes], m.rowBytes, a.ar.Row(t), out)
		return
	}
	for i := range out {
		out[i] = m.dotRow(lo+i, a.x[t*a.k:(t+1)*a.k])
	}
}

// release returns the quantized rows to the pool.
func (a actRows) release() {
	if a.ar != nil {
		act8Rows.Put(a.ar)
	}
}
