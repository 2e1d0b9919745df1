package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/strata-llm/strata/models/quant"
)

// TestMatmulIntegerDots: matmulRows through the integer kernels against
// the float64 dot of the decoded weights with the activations, within the
// activation quantization's bound (quant.Act8), at the tiny models' widths
// and row counts off the four-row blocks, padded rows included.
func TestMatmulIntegerDots(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"q8_0", "q6_k", "q4_k", "iq2_xs", "iq4_nl", "iq4_xs", "q2_k", "q3_k", "q5_k", "q4_0", "q4_1", "q5_0", "q5_1",
		"iq2_xxs", "iq3_xxs", "iq2_s", "iq3_s", "iq1_s", "iq1_m"} {
		for _, k := range []int{32, 64, 96, 256, 640} {
			rl, err := quant.ForRow(name, k, quant.Pad)
			if err != nil {
				t.Fatal(err)
			}
			k8, ok := rl.Act8Kernel()
			if !ok {
				t.Skipf("%s: no integer kernel here", name)
			}
			const n = 37
			m, w := quantizedMatrix(rl, n, k, r)
			for _, rows := range []int{1, 3, 4, 9} {
				x := make([]float32, rows*k)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				y := make([]float32, rows*n)
				matmulRows(Backend.pool, m, x, y, rows)
				for tr := range rows {
					var a quant.Act8
					if k8.Scale256() { // the rows as matmulRows quantizes them: a scale per 256
						a.Quantize256(x[tr*k : (tr+1)*k])
					} else {
						a.Quantize(x[tr*k : (tr+1)*k])
					}
					for i := range n {
						var ref, bound float64
						for c := range k {
							ref += float64(w[i*k+c]) * float64(x[tr*k+c])
							bound += math.Abs(float64(w[i*k+c])) * float64(a.D[c/quant.Act8Block]) / 2
						}
						if got := float64(y[tr*n+i]); math.Abs(got-ref) > bound*1.001+1e-4 {
							t.Fatalf("%s k=%d rows=%d: y[%d][%d] = %.6g, decoded·x %.6g (bound %.3g)", name, k, rows, tr, i, got, ref, bound)
						}
					}
				}
			}
		}
	}
}

// TestAct8Tile: act8Tile (prefill's expert products: a group's rows at an
// offset in the quantized rows, results scattered by yoff, the four-row
// kernels with a borrowed row for a tail of three) against the float64 dot
// of the decoded weights with the activations, within the activation
// quantization's bound, for every format with an integer kernel; the
// Scale256 formats also on rows with one scale per 256 (their eight-row
// kernel for such rows).
func TestAct8Tile(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const k, n, total = 256, 37, 16
	x := make([]float32, total*k)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	var fine, wide quant.Act8Rows
	fine.Quantize(x, total, k)
	wide.Quantize256(x, total, k)
	for _, name := range []string{"q8_0", "q6_k", "q4_k", "iq2_xs", "iq4_nl", "iq4_xs", "q2_k", "q3_k", "q5_k", "q4_0", "q4_1", "q5_0", "q5_1",
		"iq2_xxs", "iq3_xxs", "iq2_s", "iq3_s", "iq1_s", "iq1_m"} {
		rl, err := quant.ForRow(name, k, quant.Pad)
		if err != nil {
			t.Fatal(err)
		}
		k8, ok := rl.Act8Kernel()
		if !ok {
			t.Skipf("%s: no integer kernel here", name)
		}
		m, w := quantizedMatrix(rl, n, k, r)
		for _, ar := range []*quant.Act8Rows{&fine, &wide} {
			if ar == &wide && !k8.Scale256() {
				continue
			}
			checkAct8Tile(t, name, k8, m, w, ar, x, r)
		}
	}
}

// checkAct8Tile is TestAct8Tile's check of one format on the rows ar (the
// rows x of k quantized).
func checkAct8Tile(t *testing.T, name string, k8 quant.Act8Dot, m matrix, w []float32, ar *quant.Act8Rows, x []float32, r *rand.Rand) {
	t.Helper()
	const k, n = 256, 37
	// (first row, rows): tails of 0 to 3, a tail of three at the end of
	// the quantized rows (no row after it to borrow) and alone; eight
	// rows, and tails of six and seven borrowing rows before the group,
	// after it and within it
	for _, c := range [][2]int{{0, 1}, {2, 2}, {1, 3}, {13, 3}, {0, 4}, {3, 7}, {0, 9}, {2, 10},
		{0, 8}, {0, 6}, {10, 6}, {1, 14}, {0, 15}, {5, 11}} {
		r0, rows := c[0], c[1]
		yoff := r.Perm(rows)
		for i := range yoff {
			yoff[i] *= n
		}
		y := make([]float32, rows*n)
		for i := range y {
			y[i] = float32(math.NaN()) // the rows it must not write stay NaN
		}
		lo, hi := 1, n-1
		act8Tile(k8, m, lo, hi, ar, r0, y, yoff)
		for tr := range rows {
			a := ar.Row(r0 + tr)
			xr := x[(r0+tr)*k : (r0+tr+1)*k]
			for i := range n {
				got := float64(y[yoff[tr]+i])
				if i < lo || i >= hi {
					if !math.IsNaN(got) {
						t.Fatalf("%s rows %d..%d: weight row %d outside [%d, %d) written", name, r0, r0+rows, i, lo, hi)
					}
					continue
				}
				var ref, bound float64
				for c := range k {
					ref += float64(w[i*k+c]) * float64(xr[c])
					bound += math.Abs(float64(w[i*k+c])) * float64(a.D[c/quant.Act8Block]) / 2
				}
				if !(math.Abs(got-ref) <= bound*1.001+1e-4) { // a NaN fails
					t.Fatalf("%s rows %d..%d: row %d · weight row %d = %.6g, decoded·x %.6g (bound %.3g)", name, r0, r0+rows, tr, i, got, ref, bound)
				}
			}
		}
	}
}

// TestTilePlan: act8Tile's calls write every row of the group once, take
// only rows the buffer holds, and use only the kernels the format has.
func TestTilePlan(t *testing.T) {
	for _, name := range []string{"q4_k", "iq2_xxs"} {
		rl, err := quant.ForRow(name, 256, quant.Pad)
		if err != nil {
			t.Fatal(err)
		}
		k8, ok := rl.Act8Kernel()
		if !ok {
			t.Skipf("%s: no integer kernel here", name)
		}
		for rows := 1; rows <= 20; rows++ {
			for r0 := range 9 {
				for spare := range 9 {
					total := r0 + rows + spare
					plan := tilePlan(k8, rows, r0, total, nil)
					written := make([]int, rows)
					for _, c := range plan {
						switch {
						case c.width == 8 && !k8.HasDot8(), c.width == 4 && !k8.HasDot4(), c.width == 2 && !k8.HasDot2(),
							c.width != 1 && c.width != 2 && c.width != 4 && c.width != 8:
							t.Fatalf("%s rows %d at %d of %d: a call of width %d", name, rows, r0, total, c.width)
						case r0+c.start < 0 || r0+c.start+c.width > total || c.from < c.start || c.to > c.start+c.width:
							t.Fatalf("%s rows %d at %d of %d: call %+v outside the buffer", name, rows, r0, total, c)
						}
						for r := c.from; r < c.to; r++ {
							written[r]++
						}
					}
					for r, w := range written {
						if w != 1 {
							t.Fatalf("%s rows %d at %d of %d: row %d written %d times (%+v)", name, rows, r0, total, r, w, plan)
						}
					}
				}
			}
		}
	}
}

// decodeOnlyRow fills row with random blocks of f, a format without a
// quantizer (the IQ grid formats), their scale d a small f16.
// quantizedMatrix is n rows of k values stored in rl's format (Gaussian values
// quantized, or random blocks for a format with no quantizer) and their
// float32 decode.
func quantizedMatrix(rl quant.RowLayout, n, k int, r *rand.Rand) (matrix, []float32) {
	rb := rl.RowBytes()
	data := make([]byte, n*rb)
	w := make([]float32, n*k)
	for i := range w {
		w[i] = float32(r.NormFloat64())
	}
	for i := range n {
		if rl.Format.Encode != nil {
			rl.EncodeRow(w[i*k:(i+1)*k], data[i*rb:(i+1)*rb])
		} else {
			decodeOnlyRow(rl.Format, data[i*rb:(i+1)*rb], r)
		}
		rl.DecodeRow(data[i*rb:(i+1)*rb], w[i*k:(i+1)*k])
	}
	return matrix{data: data, rl: rl, rows: n, cols: k, rowBytes: rb}, w
}

func decodeOnlyRow(f *quant.Format, row []byte, r *rand.Rand) {
	for i := range row {
		row[i] = byte(r.Uint32())
	}
	for b := 0; b < len(row); b += f.BlockBytes {
		d := quant.F16(0.01 + 0.01*float32(r.Float64()))
		if f.Name == "iq1_m" { // d's four nibbles atop the four scale words at 48
			for k := range 4 {
				hi := &row[b+49+2*k]
				*hi = *hi&0x0f | byte(d>>(4*k))<<4
			}
			continue
		}
		row[b], row[b+1] = byte(d), byte(d>>8)
	}
}
