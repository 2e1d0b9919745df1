package quant

import "unsafe"

// The AVX2 integer kernels of the grid IQ formats (asm/act8's iq.go):
// registered by their own init beside archAct8's, under the same
// condition. Each kernel takes its tables by pointer: the grid of
// magnitudes and, for iq2_xxs and iq3_xxs, the ksigns patterns as ±1
// bytes.
func init() {
	for name, k := range archIQAct8() {
		act8Dots[registry[name]] = k.one
		act8Dots4[registry[name]] = k.four
	}
}

type iqAct8Kernel struct {
	one  act8Func
	four act8x4Func
}

// iqOne and iqFour are the generated kernels' signatures, the tables bound.
type (
	iqOne  = func(b *byte, q *int8, d *float32, nb int) float32
	iqFour = func(b *byte, q *int8, d *float32, qs, ds, nb int, out *[4]float32)
)

func archIQAct8() map[string]iqAct8Kernel {
	if !haveAVX2 {
		return nil
	}
	signs := (*byte)(unsafe.Pointer(&iqSignBytes()[0]))
	grid1 := (*byte)(unsafe.Pointer(&iq1sGrid8()[0]))
	two := func(grid *byte, one func(b *byte, q *int8, d *float32, nb int, g, s *byte) float32,
		four func(b *byte, q *int8, d *float32, qs, ds, nb int, out *[4]float32, g, s *byte)) (iqOne, iqFour) {
		return func(b *byte, q *int8, d *float32, nb int) float32 { return one(b, q, d, nb, grid, signs) },
			func(b *byte, q *int8, d *float32, qs, ds, nb int, out *[4]float32) {
				four(b, q, d, qs, ds, nb, out, grid, signs)
			}
	}
	single := func(grid *byte, one func(b *byte, q *int8, d *float32, nb int, g *byte) float32,
		four func(b *byte, q *int8, d *float32, qs, ds, nb int, out *[4]float32, g *byte)) (iqOne, iqFour) {
		return func(b *byte, q *int8, d *float32, nb int) float32 { return one(b, q, d, nb, grid) },
			func(b *byte, q *int8, d *float32, qs, ds, nb int, out *[4]float32) {
				four(b, q, d, qs, ds, nb, out, grid)
			}
	}
	m := map[string]iqAct8Kernel{}
	add := func(name string, size int, one iqOne, four iqFour) {
		m[name] = iqAct8Kernel{
			one: func(b []byte, q []int8, d, _, _ []float32, nb int) float32 {
				if nb == 0 {
					return 0
				}
				_, _, _ = b[nb*size-1], q[nb*256-1], d[nb*8-1]
				return one(&b[0], &q[0], &d[0], nb)
			},
			four: act8x4(256, size, func(b *byte, a *Act8, qs, ds, nb int, out *[4]float32) {
				four(b, &a.Q[0], &a.D[0], qs, ds, nb, out)
			}, func(b *byte, a *Act8, nb int) float32 { return one(b, &a.Q[0], &a.D[0], nb) }),
		}
	}
	o, f := two((*byte)(unsafe.Pointer(&tables.iq2xxsGrid[0])), dotIQ2XXSQ8AVX2, dotIQ2XXSQ8x4AVX2)
	add("iq2_xxs", iq2xxsBytes, o, f)
	o, f = two((*byte)(unsafe.Pointer(&tables.iq3xxsGrid[0])), dotIQ3XXSQ8AVX2, dotIQ3XXSQ8x4AVX2)
	add("iq3_xxs", iq3xxsBytes, o, f)
	o, f = single((*byte)(unsafe.Pointer(&grids.iq2s[0])), dotIQ2SQ8AVX2, dotIQ2SQ8x4AVX2)
	add("iq2_s", iq2sBytes, o, f)
	o, f = single((*byte)(unsafe.Pointer(&grids.iq3s[0])), dotIQ3SQ8AVX2, dotIQ3SQ8x4AVX2)
	add("iq3_s", iq3sBytes, o, f)
	o, f = single(grid1, dotIQ1SQ8AVX2, dotIQ1SQ8x4AVX2)
	add("iq1_s", iq1sBytes, o, f)
	o, f = single(grid1, dotIQ1MQ8AVX2, dotIQ1MQ8x4AVX2)
	add("iq1_m", iq1mBytes, o, f)
	return m
}

// iqSignBytes is ksigns_iq2xs as eight bytes per pattern: −1 where bit j
// is set, else +1 (VPSIGNB's operand).
func iqSignBytes() *[128]uint64 {
	t := new([128]uint64)
	for i, s := range tables.ksigns {
		for j := range 8 {
			b := uint64(1)
			if s>>j&1 != 0 {
				b = 0xff
			}
			t[i] |= b << (8 * j)
		}
	}
	return t
}

// iq1sGrid8 is iq1s_grid with every level times 8 (−8, 0, 8 as int8): the
// kernels add the ±1 shift to it in bytes.
func iq1sGrid8() *[iq1sNGrid]uint64 {
	t := new([iq1sNGrid]uint64)
	for i, g := range grids.iq1s {
		for j := range 8 {
			t[i] |= uint64(uint8(8*int8(g>>(8*j)))) << (8 * j)
		}
	}
	return t
}
