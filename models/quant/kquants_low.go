package quant

import "math"

// Q2_K (ggml type 10), 84 bytes per 256: scales[16] @0 (per 16 elements, low
// nibble scale, high nibble min), qs[64] @16 (2-bit levels), d f16 @80, dmin
// f16 @82; y = d·sc·q − dmin·m.
//
// Q3_K (ggml type 11), 110 bytes per 256: hmask[32] @0 (third bit of each
// level), qs[64] @32 (low two bits), scales[12] @96 (sixteen 6-bit scales),
// d f16 @108; y = d·(sc − 32)·(q − 4), q in 0..7.
//
// Q5_K (ggml type 13), 176 bytes per 256: d, dmin f16 @0, @2, scales[12] @4
// (Q4_K's packed 6-bit (scale, min) pairs), qh[32] @16 (fifth bits), qs[128]
// @48 (low nibbles); y = d·sc·q − dmin·m, q in 0..31.
//
// In Q2_K and Q3_K, byte l of each 32-byte run of qs (one run per 128
// elements) holds elements l, l+32, l+64, l+96 at bits 0, 2, 4, 6. In Q3_K
// bit k of hmask[l] is the high bit of element 32k + l; in Q5_K bits 2p and
// 2p+1 of qh[l] are the fifth bits of elements 64p + l and 64p + 32 + l.

const (
	q2kBytes = 84
	q3kBytes = 110
	q5kBytes = 176
)

func decodeQ2K(src []byte, dst []float32) {
	for b := 0; b*256 < len(dst); b++ {
		blk := src[b*q2kBytes : (b+1)*q2kBytes]
		d, dmin := f16At(blk[80:]), f16At(blk[82:])
		y := dst[b*256 : (b+1)*256]
		for g := 0; g < 16; g++ {
			sc := blk[g]
			dl, ml := d*float32(sc&15), dmin*float32(sc>>4)
			// Group g (elements 16g …): byte 16g % 32 + l of the run for its
			// 128 elements, at bits 2·(g % 8 / 2).
			q := blk[16+32*(g/8)+16*(g%2):][:16]
			shift := 2 * (g % 8 / 2)
			yg := y[16*g : 16*g+16]
			for l, v := range q {
				yg[l] = dl*float32(v>>shift&3) - ml
			}
		}
	}
}

func dotQ2K(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*256 < len(x); b++ {
		blk := src[b*q2kBytes : (b+1)*q2kBytes]
		xb := x[b*256 : (b+1)*256]
		var sq, sm float64
		for g := 0; g < 16; g++ {
			q := blk[16+32*(g/8)+16*(g%2):][:16]
			shift := 2 * (g % 8 / 2)
			var qx, sx float64
			for l, v := range xb[16*g : 16*g+16] {
				qx += float64(q[l]>>shift&3) * float64(v)
				sx += float64(v)
			}
			sq += float64(blk[g]&15) * qx
			sm += float64(blk[g]>>4) * sx
		}
		s += float64(f16At(blk[80:]))*sq - float64(f16At(blk[82:]))*sm
	}
	return s
}

// q3kScale is the signed scale (sc − 32) of 16-element group g of a Q3_K
// block's 12 scale bytes: low nibbles of bytes 0–7 for groups 0–7, their
// high nibbles for 8–15, the two high bits in byte 8 + g%4 at bit 2·(g/4).
func q3kScale(s []byte, g int) int {
	lo := int(s[g%8] >> (4 * (g / 8)) & 15)
	hi := int(s[8+g%4] >> (2 * (g / 4)) & 3)
	return lo | hi<<4 - 32
}

// q3kGroup writes the 16 signed levels (q − 4) of group g of a Q3_K block.
func q3kGroup(blk []byte, g int, out *[16]int) {
	q := blk[32+32*(g/8)+16*(g%2):][:16]
	hm := blk[16*(g%2):][:16]
	shift, hbit := 2*(g%8/2), g/2
	for l, v := range q {
		out[l] = int(v>>shift&3) - 4 + 4*int(hm[l]>>hbit&1)
	}
}

func decodeQ3K(src []byte, dst []float32) {
	var lv [16]int
	for b := 0; b*256 < len(dst); b++ {
		blk := src[b*q3kBytes : (b+1)*q3kBytes]
		d := f16At(blk[108:])
		y := dst[b*256 : (b+1)*256]
		for g := 0; g < 16; g++ {
			dl := d * float32(q3kScale(blk[96:108], g))
			q3kGroup(blk, g, &lv)
			for l, q := range lv {
				y[16*g+l] = dl * float32(q)
			}
		}
	}
}

func dotQ3K(src []byte, x []float32) float64 {
	var lv [16]int
	var s float64
	for b := 0; b*256 < len(x); b++ {
		blk := src[b*q3kBytes : (b+1)*q3kBytes]
		xb := x[b*256 : (b+1)*256]
		var acc float64
		for g := 0; g < 16; g++ {
			q3kGroup(blk, g, &lv)
			var qx float64
			for l, v := range xb[16*g : 16*g+16] {
				qx += float64(lv[l]) * float64(v)
			}
			acc += float64(q3kScale(blk[96:108], g)) * qx
		}
		s += float64(f16At(blk[108:])) * acc
	}
	return s
}

func decodeQ5K(src []byte, dst []float32) {
	for b := 0; b*256 < len(dst); b++ {
		blk := src[b*q5kBytes : (b+1)*q5kBytes]
		d, dmin := f16At(blk), f16At(blk[2:])
		y := dst[b*256 : (b+1)*256]
		qh := blk[16:48]
		for j := 0; j < 8; j++ {
			sc, m := q4kScaleMin(blk[4:16], j)
			dl, ml := d*float32(sc), dmin*float32(m)
			// Sub-block j: nibble j%2 of bytes 32·(j/2) … of qs, bit j of qh.
			qs := blk[48+32*(j/2):][:32]
			shift := 4 * (j % 2)
			yj := y[32*j : 32*j+32]
			for l, v := range qs {
				yj[l] = dl*float32(int(v>>shift&15)|int(qh[l]>>j&1)<<4) - ml
			}
		}
	}
}

func dotQ5K(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*256 < len(x); b++ {
		blk := src[b*q5kBytes : (b+1)*q5kBytes]
		xb := x[b*256 : (b+1)*256]
		qh := blk[16:48]
		var sq, sm float64
		for j := 0; j < 8; j++ {
			sc, m := q4kScaleMin(blk[4:16], j)
			qs := blk[48+32*(j/2):][:32]
			shift := 4 * (j % 2)
			var qx, sx float64
			for l, v := range xb[32*j : 32*j+32] {
				qx += float64(int(qs[l]>>shift&15)|int(qh[l]>>j&1)<<4) * float64(v)
				sx += float64(v)
			}
			sq += float64(sc) * qx
			sm += float64(m) * sx
		}
		s += float64(f16At(blk))*sq - float64(f16At(blk[2:]))*sm
	}
	return s
}

// makeQKX2 is ggml's make_qkx2_quants, in its operation order (the float32
// roundings decide ties between candidate scales, so the order is part of
// reproducing ggml's blocks): levels L in [0, nmax] with x ≈ scale·L − min,
// min ≥ 0, minimising the weighted squared (or, mad, absolute) error over
// nstep+1 trial reciprocal scales. Returns scale and min.
//
// The race detector skips it, as fitScaleMin: both callers (encodeQ2K,
// encodeQ5K) read all of x to make w and read L to pack it, where the
// detector sees it.
//
//go:norace
func makeQKX2(x, w []float32, nmax int, L []uint8, rmin, rdelta float32, nstep int, mad bool) (float32, float32) {
	lo, hi := x[0], x[0]
	sumW := w[0]
	sumX := sumW * x[0]
	for i := 1; i < len(x); i++ {
		lo, hi = min(lo, x[i]), max(hi, x[i])
		sumW += w[i]
		sumX += w[i] * x[i]
	}
	lo = min(lo, 0)
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	errOf := func(scale, mn float32, q []uint8) float32 {
		var e float32
		for i, v := range x {
			diff := scale*float32(q[i]) + mn - v
			if mad {
				diff = abs32(diff)
			} else {
				diff = diff * diff
			}
			e += w[i] * diff
		}
		return e
	}
	iscale := float32(nmax) / (hi - lo)
	scale, mn := 1/iscale, lo
	for i, v := range x {
		L[i] = uint8(clampInt(nearestInt(iscale*(v-lo)), 0, nmax))
	}
	best := errOf(scale, mn, L)
	var aux [32]uint8
	la := aux[:len(x)]
	for is := 0; is <= nstep; is++ {
		// ggml measures the trial scales from the best min so far, not
		// from the block's minimum.
		iscale := (rmin + rdelta*float32(is) + float32(nmax)) / (hi - mn)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := clampInt(nearestInt(iscale*(v-mn)), 0, nmax)
			la[i] = uint8(l)
			fl := float32(l)
			sumL += w[i] * fl
			sumL2 += w[i] * fl * fl
			sumXL += w[i] * fl * v
		}
		D := sumW*sumL2 - sumL*sumL
		if D > 0 {
			s := (sumW*sumXL - sumX*sumL) / D
			m := (sumL2*sumX - sumL*sumXL) / D
			if m > 0 {
				m = 0
				s = sumXL / sumL2
			}
			if e := errOf(s, m, la); e < best {
				copy(L, la)
				best, scale, mn = e, s, m
			}
		}
	}
	return scale, -mn
}

// packQ2 stores 256 2-bit levels as Q2_K and Q3_K keep them.
func packQ2(qs []byte, L []uint8) {
	for n := 0; n < 2; n++ {
		for l := 0; l < 32; l++ {
			j := 128 * n
			qs[32*n+l] = L[j+l] | L[j+l+32]<<2 | L[j+l+64]<<4 | L[j+l+96]<<6
		}
	}
}

// encodeQ2K is quantize_row_q2_K_ref: per 16 elements makeQKX2 (weights |x|,
// absolute error), 4-bit scales and mins relative to the largest of each,
// levels re-derived from the stored scales.
func encodeQ2K(src []float32, dst []byte) {
	var L [256]uint8
	var w [16]float32
	var scales, mins [16]float32
	for b := 0; b*256 < len(src); b++ {
		x := src[b*256 : (b+1)*256]
		blk := dst[b*q2kBytes : (b+1)*q2kBytes]
		clear(blk)
		var maxScale, maxMin float32
		for j := 0; j < 16; j++ {
			xs := x[16*j : 16*j+16]
			for l, v := range xs {
				w[l] = abs32(v)
			}
			scales[j], mins[j] = makeQKX2(xs, w[:], 3, L[16*j:16*j+16], -0.5, 0.1, 15, true)
			maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
		}
		if maxScale > 0 {
			is := 15 / maxScale
			for j := range scales {
				blk[j] = uint8(nearestInt(is * scales[j]))
			}
			putF16(blk[80:], maxScale/15)
		}
		if maxMin > 0 {
			is := 15 / maxMin
			for j := range mins {
				blk[j] |= uint8(nearestInt(is*mins[j])) << 4
			}
			putF16(blk[82:], maxMin/15)
		}
		d, dmin := f16At(blk[80:]), f16At(blk[82:])
		for j := 0; j < 16; j++ {
			dl := d * float32(blk[j]&15)
			if dl == 0 {
				continue
			}
			dm := dmin * float32(blk[j]>>4)
			for i, v := range x[16*j : 16*j+16] {
				L[16*j+i] = uint8(clampInt(nearestInt((v+dm)/dl), 0, 3))
			}
		}
		packQ2(blk[16:80], L[:])
	}
}

// makeQ3 is ggml's make_q3_quants with rmse: levels in [−nmax, nmax−1] from
// the value of largest magnitude, then up to five passes moving single
// levels where that lowers the weighted (x²) error. Returns the scale and
// stores L + nmax.
func makeQ3(x []float32, nmax int, L []int8) float32 {
	var mx, amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, mx = a, v
		}
	}
	if amax < 1e-15 {
		clear(L)
		return 0
	}
	iscale := -float32(nmax) / mx
	var sumlx, suml2 float32
	for i, v := range x {
		l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
		L[i] = int8(l)
		w := v * v
		sumlx += w * v * float32(l)
		suml2 += w * float32(l) * float32(l)
	}
	for try := 0; try < 5; try++ {
		changed := 0
		for i, v := range x {
			w := v * v
			li := float32(L[i])
			slx := sumlx - w*v*li
			if slx > 0 {
				sl2 := suml2 - w*li*li
				nl := clampInt(nearestInt(v*sl2/slx), -nmax, nmax-1)
				if nl != int(L[i]) {
					fl := float32(nl)
					slx += w * v * fl
					sl2 += w * fl * fl
					if sl2 > 0 && slx*slx*suml2 > sumlx*sumlx*sl2 {
						L[i], sumlx, suml2 = int8(nl), slx, sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range x {
		L[i] += int8(nmax)
	}
	return sumlx / suml2
}

// encodeQ3K is quantize_row_q3_K_ref: makeQ3 per 16 elements, 6-bit scales
// relative to the largest magnitude (which lands on −32), levels re-derived
// from the stored scales, high bits to hmask.
func encodeQ3K(src []float32, dst []byte) {
	var L [256]int8
	var scales [16]float32
	for b := 0; b*256 < len(src); b++ {
		x := src[b*256 : (b+1)*256]
		blk := dst[b*q3kBytes : (b+1)*q3kBytes]
		clear(blk)
		var maxScale, amax float32
		for j := 0; j < 16; j++ {
			scales[j] = makeQ3(x[16*j:16*j+16], 4, L[16*j:16*j+16])
			if a := abs32(scales[j]); a > amax {
				amax, maxScale = a, scales[j]
			}
		}
		s := blk[96:108]
		if maxScale != 0 {
			iscale := -32 / maxScale
			for j := 0; j < 16; j++ {
				l := uint8(clampInt(int(int8(nearestInt(iscale*scales[j]))), -32, 31) + 32)
				s[j%8] |= (l & 15) << (4 * (j / 8))
				s[8+j%4] |= l >> 4 << (2 * (j / 4))
			}
			putF16(blk[108:], 1/iscale)
		}
		d := f16At(blk[108:])
		for j := 0; j < 16; j++ {
			dl := d * float32(q3kScale(s, j))
			if dl == 0 {
				continue
			}
			for i, v := range x[16*j : 16*j+16] {
				L[16*j+i] = int8(clampInt(nearestInt(v/dl), -4, 3) + 4)
			}
		}
		var u [256]uint8
		for e, l := range L {
			if l > 3 {
				blk[e%32] |= 1 << (e / 32)
				l -= 4
			}
			u[e] = uint8(l)
		}
		packQ2(blk[32:96], u[:])
	}
}

// encodeQ5K is quantize_row_q5_K_ref: Q4_K's scheme with 5-bit levels
// (makeQKX2 with nmax 31, rmin −0.5, 15 steps).
func encodeQ5K(src []float32, dst []byte) {
	var L [256]uint8
	var w [32]float32
	var scales, mins [8]float32
	for b := 0; b*256 < len(src); b++ {
		x := src[b*256 : (b+1)*256]
		blk := dst[b*q5kBytes : (b+1)*q5kBytes]
		clear(blk)
		var maxScale, maxMin float32
		for j := 0; j < 8; j++ {
			xs := x[32*j : 32*j+32]
			var sum2 float32
			for _, v := range xs {
				sum2 += v * v
			}
			av := float32(math.Sqrt(float64(sum2 / 32)))
			for i, v := range xs {
				w[i] = av + abs32(v)
			}
			scales[j], mins[j] = makeQKX2(xs, w[:], 31, L[32*j:32*j+32], -0.5, 0.1, 15, false)
			maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
		}
		var invScale, invMin float32
		if maxScale > 0 {
			invScale = 63 / maxScale
		}
		if maxMin > 0 {
			invMin = 63 / maxMin
		}
		s := blk[4:16]
		for j := 0; j < 8; j++ {
			ls := min(uint8(nearestInt(invScale*scales[j])), 63)
			lm := min(uint8(nearestInt(invMin*mins[j])), 63)
			if j < 4 {
				s[j], s[j+4] = ls, lm
			} else {
				s[j+4] = ls&15 | lm&15<<4
				s[j-4] |= ls >> 4 << 6
				s[j] |= lm >> 4 << 6
			}
		}
		d := putF16(blk, maxScale/63)
		dmin := putF16(blk[2:], maxMin/63)
		for j := 0; j < 8; j++ {
			sc, m := q4kScaleMin(s, j)
			dl := d * float32(sc)
			if dl == 0 {
				continue
			}
			dm := dmin * float32(m)
			for i, v := range x[32*j : 32*j+32] {
				L[32*j+i] = uint8(clampInt(nearestInt((v+dm)/dl), 0, 31))
			}
		}
		for e, l := range L {
			p, hi := e/64, e%64/32
			if l > 15 {
				blk[16+e%32] |= 1 << (2*p + hi)
				l -= 16
			}
			blk[48+32*p+e%32] |= l << (4 * hi)
		}
	}
}
