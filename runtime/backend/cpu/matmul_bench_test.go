package cpu

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-llm/strata/models/quant"
)

// BenchmarkMatmul is matmul on the shape of llama.cpp's test-backend-ops
// perf MUL_MAT cases (4096 output rows of 14336, batches of 1, 8 and 512
// activation rows), so the two report the same GFLOPS (2·m·k·rows per run)
// on the same machine: see docs/cpu.md.
func BenchmarkMatmul(b *testing.B) {
	const m, k = 4096, 14336
	// The f16 scale fields of each format's blocks, set to a small finite
	// value; the other bytes are random levels.
	scales := map[string][]int{"q8_0": {0}, "q4_k": {0, 2}, "q6_k": {208}, "iq2_xs": {0}}
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"q4_k", "q6_k", "q8_0", "iq2_xs", "f16"} {
		b.Run(name, func(b *testing.B) { benchMatmul(b, name, m, k, scales[name], r) })
	}
}

func benchMatmul(b *testing.B, name string, m, k int, scales []int, r *rand.Rand) {
	w := randomMatrix(name, m, k, scales, r)
	for _, rows := range []int{1, 8, 512} {
		x := make([]float32, rows*k)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		y := make([]float32, rows*m)
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			for b.Loop() {
				matmulRows(Backend.pool, w, x, y, rows)
			}
			b.ReportMetric(2*float64(m)*float64(k)*float64(rows)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOPS")
		})
	}
}

// randomMatrix is m rows of k random levels in the named format, its scale
// fields (at the block offsets scales) set to a small finite value.
func randomMatrix(name string, m, k int, scales []int, r *rand.Rand) matrix {
	f, _ := quant.Lookup(name)
	rl := quant.RowLayout{Format: f, Len: k, Stored: k}
	data := make([]byte, m*rl.RowBytes())
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if name == "f16" {
		for i := 0; i < len(data); i += 2 {
			binary.LittleEndian.PutUint16(data[i:], quant.F16(float32(r.NormFloat64())))
		}
	}
	for blk := 0; blk < len(data); blk += f.BlockBytes {
		for _, off := range scales {
			binary.LittleEndian.PutUint16(data[blk+off:], quant.F16(0.01))
		}
	}
	w := matrix{data: data, rl: rl, rows: m, cols: k, rowBytes: rl.RowBytes()}
	return w
}
