package quant

import "unsafe"

// The AVX2 integer kernels of the grid IQ formats (asm/act8's iq.go),
// registered by their own init beside archAct8's, under the same
// condition. Each takes its grid by pointer: ggml's iq2xxs, iq3xxs,
// iq2s and iq3s grids as parsed, and iq1s_grid times 8 (iq1sGrid8).
func init() {
	for name, k := range archIQAct8() {
		act8Dots[registry[name]] = k.one
		act8Dots2[registry[name]] = k.two
		act8Dots4[registry[name]] = k.four
		act8Dots8[registry[name]] = k.eight
		if k.wide != nil {
			registerWide(registry[name], *k.wide)
		}
	}
	// iq2_xs keeps its one- and four-row kernels (archAct8's: one table of
	// every qs word's signed levels); its two- and eight-row ones are the
	// grid kernels'.
	if f, ok := registry["iq2_xs"]; ok && act8Dots4[f] != nil {
		g := (*byte)(unsafe.Pointer(&iq2xsGridTable))
		one := func(b *byte, a *Act8, nb int) float32 {
			return dotIQ2XSQ8AVX2(b, &a.Q[0], &a.D[0], nb, &iq2Signed()[0])
		}
		act8Dots2[f] = act8x2(256, iq2xsBytes, func(b *byte, a *Act8, qs, ds, nb int, out *[2]float32) {
			dotIQ2XSGridQ8x2AVX2(b, &a.Q[0], &a.D[0], qs, ds, nb, out, g)
		}, one)
		act8Dots8[f] = act8x8(256, iq2xsBytes, func(b *byte, a *Act8, qs, ds, nb int, out *[8]float32) {
			dotIQ2XSGridQ8x8AVX2(b, &a.Q[0], &a.D[0], sums16(a), qs, ds, nb, out, g)
		}, act8Dots4[f])
	}
}

type iqAct8Kernel struct {
	one   act8Func
	two   act8x2Func
	four  act8x4Func
	eight act8x8Func
	wide  *wideKernels // the kernels for Quantize256's rows, where there are
}

// iqKernel8 is an eight-row kernel of a grid IQ format. It takes the
// activation's sums (sums8) beside its scales.
type iqKernel8 = func(b *byte, q *int8, d, sums *float32, qs, ds, nb int, out *[8]float32, grid *byte)

// iqWide are a format's two-, four- and eight-row kernels for rows with
// one scale per 256 (Quantize256), each taking the sums per 32 (Act8.S).
type iqWide struct {
	two   func(b *byte, q *int8, d, sums *float32, qs, ds, nb int, out *[2]float32, grid *byte)
	four  func(b *byte, q *int8, d, sums *float32, qs, ds, nb int, out *[4]float32, grid *byte)
	eight iqKernel8
}

// sums32 and sums16 are the activation sums the eight-row IQ kernels take:
// per 32 where the format's scale is per 32, per 16 where it is per 16.
func sums32(a *Act8) *float32 { return &a.S[0] }
func sums16(a *Act8) *float32 { return &a.H[0] }

func archIQAct8() map[string]iqAct8Kernel {
	if !haveAVX2 {
		return nil
	}
	grid1 := iq1sGrid8()
	m := map[string]iqAct8Kernel{}
	add := func(name string, size int, grid unsafe.Pointer, one func(b *byte, q *int8, d *float32, nb int, grid *byte) float32,
		two func(b *byte, q *int8, d *float32, qs, ds, nb int, out *[2]float32, grid *byte),
		four func(b *byte, q *int8, d *float32, qs, ds, nb int, out *[4]float32, grid *byte), eight iqKernel8, sums func(*Act8) *float32, wide *iqWide) {
		g := (*byte)(grid)
		oneRow := func(b *byte, a *Act8, nb int) float32 { return one(b, &a.Q[0], &a.D[0], nb, g) }
		k := iqAct8Kernel{
			one: func(b []byte, q []int8, d, _, _ []float32, _ []int16, nb int) float32 {
				if nb == 0 {
					return 0
				}
				_, _, _ = b[nb*size-1], q[nb*256-1], d[nb*8-1]
				return one(&b[0], &q[0], &d[0], nb, g)
			},
			two: act8x2(256, size, func(b *byte, a *Act8, qs, ds, nb int, out *[2]float32) {
				two(b, &a.Q[0], &a.D[0], qs, ds, nb, out, g)
			}, oneRow),
			four: act8x4(256, size, func(b *byte, a *Act8, qs, ds, nb int, out *[4]float32) {
				four(b, &a.Q[0], &a.D[0], qs, ds, nb, out, g)
			}, oneRow),
		}
		k.eight = act8x8(256, size, func(b *byte, a *Act8, qs, ds, nb int, out *[8]float32) {
			eight(b, &a.Q[0], &a.D[0], sums(a), qs, ds, nb, out, g)
		}, k.four)
		if wide != nil {
			four := act8x4(256, size, func(b *byte, a *Act8, qs, ds, nb int, out *[4]float32) {
				wide.four(b, &a.Q[0], &a.D[0], &a.S[0], qs, ds, nb, out, g)
			}, oneRow)
			k.wide = &wideKernels{
				two: act8x2(256, size, func(b *byte, a *Act8, qs, ds, nb int, out *[2]float32) {
					wide.two(b, &a.Q[0], &a.D[0], &a.S[0], qs, ds, nb, out, g)
				}, oneRow),
				four: four,
				eight: act8x8(256, size, func(b *byte, a *Act8, qs, ds, nb int, out *[8]float32) {
					wide.eight(b, &a.Q[0], &a.D[0], &a.S[0], qs, ds, nb, out, g)
				}, four),
			}
		}
		m[name] = k
	}
	add("iq2_xxs", iq2xxsBytes, unsafe.Pointer(&iq2xxsTable), dotIQ2XXSQ8AVX2, dotIQ2XXSQ8x2AVX2, dotIQ2XXSQ8x4AVX2, dotIQ2XXSQ8x8AVX2, sums32, &iqWide{dotIQ2XXSQ8Kx2AVX2, dotIQ2XXSQ8Kx4AVX2, dotIQ2XXSQ8Kx8AVX2})
	add("iq3_xxs", iq3xxsBytes, unsafe.Pointer(&iq3xxsTable), dotIQ3XXSQ8AVX2, dotIQ3XXSQ8x2AVX2, dotIQ3XXSQ8x4AVX2, dotIQ3XXSQ8x8AVX2, sums32, &iqWide{dotIQ3XXSQ8Kx2AVX2, dotIQ3XXSQ8Kx4AVX2, dotIQ3XXSQ8Kx8AVX2})
	add("iq2_s", iq2sBytes, unsafe.Pointer(&grids.iq2s[0]), dotIQ2SQ8AVX2, dotIQ2SQ8x2AVX2, dotIQ2SQ8x4AVX2, dotIQ2SQ8x8AVX2, sums16, nil)
	add("iq3_s", iq3sBytes, unsafe.Pointer(&grids.iq3s[0]), dotIQ3SQ8AVX2, dotIQ3SQ8x2AVX2, dotIQ3SQ8x4AVX2, dotIQ3SQ8x8AVX2, sums32, &iqWide{dotIQ3SQ8Kx2AVX2, dotIQ3SQ8Kx4AVX2, dotIQ3SQ8Kx8AVX2})
	add("iq1_s", iq1sBytes, unsafe.Pointer(&grid1[0]), dotIQ1SQ8AVX2, dotIQ1SQ8x2AVX2, dotIQ1SQ8x4AVX2, dotIQ1SQ8x8AVX2, sums32, &iqWide{dotIQ1SQ8Kx2AVX2, dotIQ1SQ8Kx4AVX2, dotIQ1SQ8Kx8AVX2})
	add("iq1_m", iq1mBytes, unsafe.Pointer(&grid1[0]), dotIQ1MQ8AVX2, dotIQ1MQ8x2AVX2, dotIQ1MQ8x4AVX2, dotIQ1MQ8x8AVX2, sums16, nil)
	return m
}

// iq1sGrid8 is iq1s_grid with every level times 8 (−8, 0, 8 as int8), 16
// KiB as the grid itself: the kernels add the ±1 shift to it in bytes.
func iq1sGrid8() *[iq1sNGrid]uint64 {
	t := new([iq1sNGrid]uint64)
	for i, g := range grids.iq1s {
		for j := range 8 {
			t[i] |= uint64(uint8(8*int8(g>>(8*j)))) << (8 * j)
		}
	}
	return t
}

// iq2xsGridTable, iq2xxsTable and iq3xxsTable are the iq2_xs (two and
// eight rows), iq2_xxs and iq3_xxs kernels' grid tables: ggml's grid, then
// ksigns as ±1 bytes (iq2SignBytes) where the kernels look up each 8
// values' signs.
var (
	iq2xsGridTable = struct {
		grid  [512]uint64
		signs [128]uint64
	}{tables.iq2xsGrid, iq2SignBytes}
	iq2xxsTable = struct {
		grid  [256]uint64
		signs [128]uint64
	}{tables.iq2xxsGrid, iq2SignBytes}
	iq3xxsTable = struct {
		grid  [256]uint32
		signs [128]uint64
	}{tables.iq3xxsGrid, iq2SignBytes}
)
