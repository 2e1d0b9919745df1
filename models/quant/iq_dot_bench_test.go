package quant

import (
	"slices"
	"testing"
)

// BenchmarkDotDecodeOnly times the IQ formats without a quantizer over
// ggml's random test blocks tiled to 4096 elements (ns per 256 elements;
// q4_k's BenchmarkDot is the baseline of the same run): the reference
// Dot (the float32-activation path's), then, as <format>-act8, the
// integer kernel with the activations quantized once (Act8Dot.Dot: the
// default path where the machine has one).
func BenchmarkDotDecodeOnly(b *testing.B) {
	const n = 4096
	x := gaussian(n, 1)
	var a Act8
	a.Quantize(x)
	for _, name := range []string{"iq2_xxs", "iq3_xxs", "iq2_s", "iq3_s", "iq1_s", "iq1_m"} {
		c := readGGMLCase(b, name)
		blk := slices.Repeat(c.rnd, n/len(c.rndY))
		b.Run(name, func(b *testing.B) {
			var s float64
			for b.Loop() {
				s += c.f.Dot(blk, x)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n/256), "ns/256elem")
			_ = s
		})
		k, ok := RowLayout{Format: c.f, Len: n, Stored: n}.Act8Kernel()
		if !ok {
			continue
		}
		b.Run(name+"-act8", func(b *testing.B) {
			var s float32
			for b.Loop() {
				s += k.Dot(blk, &a)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/(n/256), "ns/256elem")
			_ = s
		})
	}
}
