package quant

import (
	"encoding/binary"
	"math"
	"sync"
)

// IQ2_XS (ggml type 17): super-blocks of 256 values, 74 bytes: d f16 @0,
// qs uint16[32] @2, scales[8] @66. Each qs entry covers 8 values: a 9-bit
// index into iq2xs_grid (8 magnitudes from {8, 25, 43}) and a 7-bit index into
// ksigns_iq2xs (an even-parity sign pattern). Each 16 values (two qs entries)
// share a 4-bit scale s: y = d·(0.5+s)·0.25·grid[j]·sign[j].

const (
	iq2xsElems = 256
	iq2xsBytes = 74
	// iq2Keys is the number of 8-vectors of levels in {0, 1, 2} (3^8); only
	// 512 of them are grid points.
	iq2Keys = 6561
)

// iq2Levels are the three grid magnitudes, level 0, 1, 2.
var iq2Levels = [3]float32{8, 25, 43}

var (
	iq2Grid     [512][8]float32 // grid magnitudes as floats
	iq2GridKey  [512]int        // the base-3 level key of each grid point
	iq2SignVals [128][8]float32 // ±1 per sign index and position
	iq2SignIdx  [256]int16      // sign byte → 7-bit index, −1 for odd parity
)

func init() {
	for i, g := range tables.iq2xsGrid {
		key, p := 0, 1
		for j := 0; j < 8; j++ {
			b := uint8(g >> (8 * j))
			iq2Grid[i][j] = float32(b)
			for l, v := range iq2Levels {
				if float32(b) == v {
					key += l * p
				}
			}
			p *= 3
		}
		iq2GridKey[i] = key
	}
	for i := range iq2SignIdx {
		iq2SignIdx[i] = -1
	}
	for i, s := range tables.ksigns {
		iq2SignIdx[s] = int16(i)
		for j := 0; j < 8; j++ {
			iq2SignVals[i][j] = 1
			if s&tables.kmask[j] != 0 {
				iq2SignVals[i][j] = -1
			}
		}
	}
}

func decodeIQ2XS(src []byte, dst []float32) {
	for b := 0; b*iq2xsElems < len(dst); b++ {
		blk := src[b*iq2xsBytes : (b+1)*iq2xsBytes]
		d := f16At(blk)
		y := dst[b*iq2xsElems : (b+1)*iq2xsElems]
		for g := 0; g < 16; g++ {
			s := blk[66+g/2] >> (4 * (g % 2)) & 15
			db := d * (0.5 + float32(s)) * 0.25
			for k := 0; k < 2; k++ {
				v := binary.LittleEndian.Uint16(blk[2+2*(2*g+k):])
				grid, sign := &iq2Grid[v&511], &iq2SignVals[v>>9]
				out := y[16*g+8*k : 16*g+8*k+8]
				for j := range out {
					out[j] = db * grid[j] * sign[j]
				}
			}
		}
	}
}

func dotIQ2XS(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*iq2xsElems < len(x); b++ {
		blk := src[b*iq2xsBytes : (b+1)*iq2xsBytes]
		xb := x[b*iq2xsElems : (b+1)*iq2xsElems]
		var acc float64
		for g := 0; g < 16; g++ {
			sc := blk[66+g/2] >> (4 * (g % 2)) & 15
			var part float64
			for k := 0; k < 2; k++ {
				v := binary.LittleEndian.Uint16(blk[2+2*(2*g+k):])
				grid, sign := &iq2Grid[v&511], &iq2SignVals[v>>9]
				xs := xb[16*g+8*k : 16*g+8*k+8]
				for j, xv := range xs {
					part += float64(grid[j]*sign[j]) * float64(xv)
				}
			}
			acc += (0.5 + float64(sc)) * part
		}
		s += float64(f16At(blk)) * 0.25 * acc
	}
	return s
}

// iq2Search holds what the encoder needs beyond the decode tables: for every
// 8-vector of levels, its grid index when it is a grid point, else the grid
// points nearest to it. Built on first use (a few ms), never by decoders.
var iq2Search = sync.OnceValue(func() *iq2SearchTables {
	t := &iq2SearchTables{}
	for k := range t.onGrid {
		t.onGrid[k] = -1
	}
	for i, key := range iq2GridKey {
		t.onGrid[key] = int16(i)
	}
	var lv [8]int
	for key := 0; key < iq2Keys; key++ {
		t.start[key] = int32(len(t.neighbours))
		if t.onGrid[key] >= 0 {
			continue
		}
		for j, k := 0, key; j < 8; j, k = j+1, k/3 {
			lv[j] = k % 3
		}
		// Keep the grid points at the smallest squared level distance. A
		// second shell (avg 30 instead of 5.4 points) was measured: 0.1% less
		// RMS error for 5× the encode time.
		d1 := math.MaxInt
		dist := func(i int) int {
			s := 0
			for j, k := 0, iq2GridKey[i]; j < 8; j, k = j+1, k/3 {
				e := k%3 - lv[j]
				s += e * e
			}
			return s
		}
		for i := range iq2GridKey {
			d1 = min(d1, dist(i))
		}
		for i := range iq2GridKey {
			if dist(i) == d1 {
				t.neighbours = append(t.neighbours, uint16(i))
			}
		}
	}
	t.start[iq2Keys] = int32(len(t.neighbours))
	return t
})

type iq2SearchTables struct {
	onGrid     [iq2Keys]int16
	start      [iq2Keys + 1]int32 // neighbours of key k: neighbours[start[k]:start[k+1]]
	neighbours []uint16
}

// best returns the grid point for 8 targets t (magnitudes, one possibly
// negative after a parity flip) at scale S: the grid point of the nearest
// level vector if there is one, else the neighbour with the least
// Σ w(S·g − t)².
//
// It is most of an iq2_xs conversion's time, and under the race detector
// ten times that. It reads only the caller's iq2Group (local to one
// encodeIQ2XSWeighted call, filled by prepare, which the detector sees)
// and the tables, immutable once iq2Search's sync.OnceValue has built
// them: no access here can race, so the detector skips it.
//
//go:norace
func (st *iq2SearchTables) best(t, w []float32, S float32) int {
	t, w = t[:8], w[:8]
	inv := 1 / S
	key, p := 0, 1
	for _, v := range t {
		v *= inv
		l := 0
		if v >= 34 {
			l = 2
		} else if v >= 16.5 {
			l = 1
		}
		key += l * p
		p *= 3
	}
	if g := st.onGrid[key]; g >= 0 {
		return int(g)
	}
	best, bestErr := 0, float32(math.MaxFloat32)
	for _, i := range st.neighbours[st.start[key]:st.start[key+1]] {
		e := iq2Err(&iq2Grid[i], t, w, S)
		if e < bestErr {
			best, bestErr = int(i), e
		}
	}
	return best
}

// iq2Err is Σ w·(S·g − t)² over a half group. The race detector skips it,
// as best: t and w are the caller's iq2Group's (local to one
// encodeIQ2XSWeighted call), g a row of the tables init builds.
//
//go:norace
func iq2Err(g *[8]float32, t, w []float32, S float32) float32 {
	var e float32
	for j, v := range t[:8] {
		r := S*g[j] - v
		e += w[j] * r * r
	}
	return e
}

// iq2Fit is Σ w·g·t and Σ w·g² of a 16-value group for grid points a, b.
// The race detector skips it, as iq2Err.
//
//go:norace
func iq2Fit(a, b int, t, w []float32) (sumqx, sumq2 float32) {
	for j := 0; j < 8; j++ {
		ga, gb := iq2Grid[a][j], iq2Grid[b][j]
		sumqx += w[j]*ga*t[j] + w[j+8]*gb*t[j+8]
		sumq2 += w[j]*ga*ga + w[j+8]*gb*gb
	}
	return sumqx, sumq2
}

// iq2Group is the encoder's state for one 16-value group.
type iq2Group struct {
	t, w  [16]float32 // targets (|x|, one per 8 possibly negated) and weights
	signs [2]uint8    // even-parity sign bytes of the two halves
	idx   [2]int      // chosen grid points
	scale float32     // chosen scale (before 4-bit quantization)
}

// prepare takes the signs out of x: each half of 8 needs an even number of
// negatives, so when it has an odd number the value that costs least to get
// wrong (least w·x²) is encoded with the wrong sign, i.e. its target becomes
// −|x| (as ggml does).
func (gr *iq2Group) prepare(x, w []float32) {
	copy(gr.w[:], w)
	for k := 0; k < 2; k++ {
		var s uint8
		imin, wmin := 0, float32(math.MaxFloat32)
		for j := 0; j < 8; j++ {
			v := x[8*k+j]
			gr.t[8*k+j] = abs32(v)
			if v < 0 {
				s |= 1 << j
			}
			if c := w[8*k+j] * v * v; c < wmin {
				imin, wmin = j, c
			}
		}
		if iq2SignIdx[s] < 0 {
			s ^= 1 << imin
			gr.t[8*k+imin] = -gr.t[8*k+imin]
		}
		gr.signs[k] = s
	}
}

// search picks the group's grid points and scale (ggml's scale search for
// IQ2_XS): for 19 trial scales placing the largest target between 0.82 and
// 1.18 of the top level, map each half to its best grid point and keep the
// assignment with the largest (Σwgt)²/Σwg², i.e. the least weighted error at
// its own least-squares scale; then re-pick the grid points at that scale and
// refit once. The race detector skips it, as best: it touches only gr (one
// of encodeIQ2XSWeighted's locals, filled by prepare, which the detector
// sees) and the immutable tables; under -race it was most of an iq2_xs
// conversion's time once best was skipped.
//
//go:norace
func (gr *iq2Group) search(st *iq2SearchTables) {
	var maxT float32
	for _, v := range gr.t {
		maxT = max(maxT, v)
	}
	gr.idx, gr.scale = [2]int{}, 0
	if maxT < 1e-15 {
		return
	}
	var best float32 = -1
	for is := -9; is <= 9; is++ {
		S := maxT / (43 * (1 + 0.02*float32(is)))
		a := st.best(gr.t[:8], gr.w[:8], S)
		b := st.best(gr.t[8:], gr.w[8:], S)
		sumqx, sumq2 := iq2Fit(a, b, gr.t[:], gr.w[:])
		if sumqx > 0 && sumqx*sumqx > best*sumq2 {
			best = sumqx * sumqx / sumq2
			gr.idx, gr.scale = [2]int{a, b}, sumqx/sumq2
		}
	}
	if gr.scale <= 0 {
		return
	}
	a := st.best(gr.t[:8], gr.w[:8], gr.scale)
	b := st.best(gr.t[8:], gr.w[8:], gr.scale)
	if sumqx, sumq2 := iq2Fit(a, b, gr.t[:], gr.w[:]); sumqx > 0 && sumqx*sumqx > best*sumq2 {
		gr.idx, gr.scale = [2]int{a, b}, sumqx/sumq2
	}
}

// encodeIQ2XS quantizes with importance weights w = sqrt(σ² + x²) (ggml's
// IQ2_XS weighting with a unit importance matrix; σ² is the super-block's
// mean square), searches each 16-value group's scale and grid points, sets
// d so the largest group scale is code 15, and for each group tries the
// 4-bit codes around its scale, re-picking the grid points at each quantized
// scale and keeping the least error.
func encodeIQ2XS(src []float32, dst []byte) { encodeIQ2XSWeighted(src, nil, dst) }

// encodeIQ2XSWeighted is encodeIQ2XS with an importance matrix: qw (one
// weight per column of the row, repeated for every row of src; nil: all
// ones) multiplies each weight, w = qw·sqrt(σ² + x²), as ggml's
// quantize_row_iq2_xs_impl does with its quant_weights.
func encodeIQ2XSWeighted(src, qw []float32, dst []byte) {
	st := iq2Search()
	var w [iq2xsElems]float32
	var groups [16]iq2Group
	for b := 0; b*iq2xsElems < len(src); b++ {
		x := src[b*iq2xsElems : (b+1)*iq2xsElems]
		blk := dst[b*iq2xsBytes : (b+1)*iq2xsBytes]
		clear(blk)
		var sum2 float32
		for _, v := range x {
			sum2 += v * v
		}
		sigma2 := sum2 / iq2xsElems
		for i, v := range x {
			w[i] = float32(math.Sqrt(float64(sigma2 + v*v)))
		}
		if qw != nil {
			q := qw[(b*iq2xsElems)%len(qw):]
			for i := range w {
				w[i] *= q[i]
			}
		}
		var maxScale float32
		for g := range groups {
			gr := &groups[g]
			gr.prepare(x[16*g:16*g+16], w[16*g:16*g+16])
			gr.search(st)
			maxScale = max(maxScale, gr.scale)
		}
		if maxScale == 0 {
			continue // d = 0: all zeros
		}
		d := putF16(blk, maxScale/3.875)
		if d == 0 {
			continue
		}
		for g := range groups {
			gr := &groups[g]
			s0 := clampInt(nearestInt(gr.scale*4/d-0.5), 0, 15)
			bestS, bestIdx, bestErr := -1, [2]int{}, float32(math.MaxFloat32)
			for s := max(s0-1, 0); s <= min(s0+1, 15); s++ {
				S := d * (0.5 + float32(s)) * 0.25
				a := st.best(gr.t[:8], gr.w[:8], S)
				c := st.best(gr.t[8:], gr.w[8:], S)
				// The grid points found at the unquantized scale are candidates too.
				a = iq2Better(a, gr.idx[0], gr.t[:8], gr.w[:8], S)
				c = iq2Better(c, gr.idx[1], gr.t[8:], gr.w[8:], S)
				e := iq2Err(&iq2Grid[a], gr.t[:8], gr.w[:8], S) + iq2Err(&iq2Grid[c], gr.t[8:], gr.w[8:], S)
				if e < bestErr {
					bestS, bestIdx, bestErr = s, [2]int{a, c}, e
				}
			}
			blk[66+g/2] |= byte(bestS) << (4 * (g % 2))
			for k := 0; k < 2; k++ {
				v := uint16(bestIdx[k]) | uint16(iq2SignIdx[gr.signs[k]])<<9
				binary.LittleEndian.PutUint16(blk[2+2*(2*g+k):], v)
			}
		}
	}
}

func iq2Better(a, b int, t, w []float32, S float32) int {
	if iq2Err(&iq2Grid[b], t, w, S) < iq2Err(&iq2Grid[a], t, w, S) {
		return b
	}
	return a
}
