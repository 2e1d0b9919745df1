package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/strata-llm/strata/models/quant"
)

// BenchmarkAct8Tile is act8Tile on prefill's expert products: a group of
// g activation rows against one expert's 512 × 2048 weights, a different
// expert each call out of 200 (115 MB of q4_k: the weights come from
// memory, as a window's experts do), on the calling goroutine. The group
// sizes are those of a 512-row window over 512 experts, top-10 (mostly 5
// to 12): the tile plan's eight-, four-, two- and one-row calls and their
// borrowed rows.
func BenchmarkAct8Tile(b *testing.B) {
	const experts, n, k = 200, 512, 2048
	r := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"q4_k", "q8_0"} {
		ws := make([]matrix, experts)
		for e := range ws {
			ws[e] = randomMatrix(name, n, k, map[string][]int{"q8_0": {0}, "q4_k": {0, 2}}[name], r)
		}
		x := make([]float32, 32*k)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		var ar quant.Act8Rows
		ar.Quantize(x, 32, k)
		k8, _ := ws[0].rl.Act8Kernel()
		for _, g := range []int{5, 6, 7, 8, 10, 12} {
			y := make([]float32, g*n)
			yoff := make([]int, g)
			for i := range yoff {
				yoff[i] = i * n
			}
			b.Run(fmt.Sprintf("%s/rows=%d", name, g), func(b *testing.B) {
				e := 0
				for b.Loop() {
					act8Tile(k8, ws[e%experts], 0, n, &ar, 8, y, yoff)
					e++
				}
			})
		}
	}
}
