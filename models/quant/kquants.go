package quant

import "math"

// Q4_K (ggml type 12): super-blocks of 256 = 8 sub-blocks of 32, each with a
// 6-bit scale and a 6-bit min: d f16 @0, dmin f16 @2, scales[12] @4 (the
// packed (sc, m) pairs), qs[128] @16 (4-bit levels). y = d·sc·q − dmin·m.
//
// Q6_K (ggml type 14): super-blocks of 256 = 16 sub-blocks of 16 with int8
// scales: ql[128] @0 (low 4 bits), qh[64] @128 (high 2 bits), scales[16] @192,
// d f16 @208. y = d·sc·(q − 32), q in 0..63.

const (
	q4kElems = 256
	q4kBytes = 144
	q6kElems = 256
	q6kBytes = 210
)

// q4kScaleMin unpacks the 6-bit (scale, min) pair of sub-block j from the 12
// scale bytes (ggml's get_scale_min_k4).
func q4kScaleMin(s []byte, j int) (sc, m int) {
	if j < 4 {
		return int(s[j] & 63), int(s[j+4] & 63)
	}
	return int(s[j+4]&15) | int(s[j-4]>>6)<<4, int(s[j+4]>>4) | int(s[j]>>6)<<4
}

func decodeQ4K(src []byte, dst []float32) {
	for b := 0; b*q4kElems < len(dst); b++ {
		blk := src[b*q4kBytes : (b+1)*q4kBytes]
		d, dmin := f16At(blk), f16At(blk[2:])
		y := dst[b*q4kElems : (b+1)*q4kElems]
		for c := 0; c < 4; c++ {
			sc0, m0 := q4kScaleMin(blk[4:16], 2*c)
			sc1, m1 := q4kScaleMin(blk[4:16], 2*c+1)
			d0, o0 := d*float32(sc0), dmin*float32(m0)
			d1, o1 := d*float32(sc1), dmin*float32(m1)
			qs := blk[16+32*c : 16+32*c+32]
			for l, q := range qs {
				y[64*c+l] = d0*float32(q&15) - o0
				y[64*c+32+l] = d1*float32(q>>4) - o1
			}
		}
	}
}

func dotQ4K(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*q4kElems < len(x); b++ {
		blk := src[b*q4kBytes : (b+1)*q4kBytes]
		xb := x[b*q4kElems : (b+1)*q4kElems]
		var sumQ, sumM float64 // Σ sc·Σq·x and Σ m·Σx, scaled by d and dmin at the end
		for c := 0; c < 4; c++ {
			sc0, m0 := q4kScaleMin(blk[4:16], 2*c)
			sc1, m1 := q4kScaleMin(blk[4:16], 2*c+1)
			qs := blk[16+32*c : 16+32*c+32]
			x0, x1 := xb[64*c:64*c+32], xb[64*c+32:64*c+64]
			var q0, q1, s0, s1 float64
			for l, q := range qs {
				q0 += float64(q&15) * float64(x0[l])
				q1 += float64(q>>4) * float64(x1[l])
				s0 += float64(x0[l])
				s1 += float64(x1[l])
			}
			sumQ += float64(sc0)*q0 + float64(sc1)*q1
			sumM += float64(m0)*s0 + float64(m1)*s1
		}
		s += float64(f16At(blk))*sumQ - float64(f16At(blk[2:]))*sumM
	}
	return s
}

// fitScaleMin is our version of ggml's make_qkx2_quants: for one sub-block,
// find scale > 0 and min ≤ 0 with x ≈ scale·L + min, L in [0, nmax],
// minimising Σ w(scale·L + min − x)². It tries nstep+1 reciprocal scales
// around nmax/(max−min) and, for the levels each gives, the weighted
// least-squares (scale, min). Returns scale and −min.
//
// It is most of a q4_k conversion's time, ten times that under the race
// detector, which skips it: it touches only x, w and L, which its caller
// (encodeQ4K) reads and writes itself where the detector sees it, and
// locals.
//
//go:norace
func fitScaleMin(x, w []float32, nmax int, L []uint8, rmin, rdelta float32, nstep int) (float32, float32) {
	lo, hi := x[0], x[0]
	var sumW, sumX float32
	for i, v := range x {
		lo, hi = min(lo, v), max(hi, v)
		sumW += w[i]
		sumX += w[i] * v
	}
	lo = min(lo, 0)
	if hi == lo {
		clear(L)
		return 0, -lo
	}
	var aux [32]uint8
	la := aux[:len(x)]
	quant := func(iscale, mn float32, out []uint8) {
		for i, v := range x {
			out[i] = uint8(clampInt(nearestInt(iscale*(v-mn)), 0, nmax))
		}
	}
	errOf := func(scale, mn float32, q []uint8) float32 {
		var e float32
		for i, v := range x {
			r := scale*float32(q[i]) + mn - v
			e += w[i] * r * r
		}
		return e
	}
	iscale := float32(nmax) / (hi - lo)
	scale, mn := 1/iscale, lo
	quant(iscale, mn, L)
	best := errOf(scale, mn, L)
	for is := 0; is <= nstep; is++ {
		iscale := (rmin + rdelta*float32(is) + float32(nmax)) / (hi - lo)
		quant(iscale, lo, la)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := float32(la[i])
			sumL += w[i] * l
			sumL2 += w[i] * l * l
			sumXL += w[i] * l * v
		}
		D := sumW*sumL2 - sumL*sumL
		if D <= 0 {
			continue
		}
		s := (sumW*sumXL - sumX*sumL) / D
		m := (sumL2*sumX - sumL*sumXL) / D
		if m > 0 { // the format only subtracts a min; refit the scale alone
			m = 0
			s = sumXL / sumL2
		}
		if e := errOf(s, m, la); e < best {
			best, scale, mn = e, s, m
			copy(L, la)
		}
	}
	return scale, -mn
}

// encodeQ4K follows ggml's quantize_row_q4_K_ref: weights av(|x|)+|x| per
// sub-block, fitScaleMin with rmin −1, rdelta 0.1, 20 steps, then 6-bit
// scales and mins relative to the largest of each, and a final pass that
// re-derives the levels from the scales actually stored.
func encodeQ4K(src []float32, dst []byte) {
	var w [32]float32
	var L [q4kElems]uint8
	var scales, mins [8]float32
	for b := 0; b*q4kElems < len(src); b++ {
		x := src[b*q4kElems : (b+1)*q4kElems]
		blk := dst[b*q4kBytes : (b+1)*q4kBytes]
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
			scales[j], mins[j] = fitScaleMin(xs, w[:], 15, L[32*j:32*j+32], -1, 0.1, 20)
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
			ls := uint8(clampInt(nearestInt(invScale*scales[j]), 0, 63))
			lm := uint8(clampInt(nearestInt(invMin*mins[j]), 0, 63))
			if j < 4 {
				s[j], s[j+4] = ls, lm
			} else {
				s[j+4] = ls&15 | lm<<4
				s[j-4] |= ls >> 4 << 6
				s[j] |= lm >> 4 << 6
			}
		}
		d := putF16(blk, maxScale/63)
		dmin := putF16(blk[2:], maxMin/63)
		for j := 0; j < 8; j++ {
			sc, m := q4kScaleMin(s, j)
			dd, dm := d*float32(sc), dmin*float32(m)
			for i, v := range x[32*j : 32*j+32] {
				q := 0
				if dd != 0 {
					q = clampInt(nearestInt((v+dm)/dd), 0, 15)
				}
				L[32*j+i] = uint8(q)
			}
		}
		for c := 0; c < 4; c++ {
			for l := 0; l < 32; l++ {
				blk[16+32*c+l] = L[64*c+l] | L[64*c+32+l]<<4
			}
		}
	}
}

func decodeQ6K(src []byte, dst []float32) {
	for b := 0; b*q6kElems < len(dst); b++ {
		blk := src[b*q6kBytes : (b+1)*q6kBytes]
		d := f16At(blk[208:])
		for n := 0; n < 2; n++ {
			ql, qh, sc := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32], blk[192+8*n:192+8*n+8]
			y := dst[b*q6kElems+128*n : b*q6kElems+128*n+128]
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := int(ql[l]&15|(qh[l]&3)<<4) - 32
				q2 := int(ql[l+32]&15|(qh[l]>>2&3)<<4) - 32
				q3 := int(ql[l]>>4|(qh[l]>>4&3)<<4) - 32
				q4 := int(ql[l+32]>>4|(qh[l]>>6&3)<<4) - 32
				y[l] = d * float32(int8(sc[is])) * float32(q1)
				y[l+32] = d * float32(int8(sc[is+2])) * float32(q2)
				y[l+64] = d * float32(int8(sc[is+4])) * float32(q3)
				y[l+96] = d * float32(int8(sc[is+6])) * float32(q4)
			}
		}
	}
}

func dotQ6K(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*q6kElems < len(x); b++ {
		blk := src[b*q6kBytes : (b+1)*q6kBytes]
		var acc float64
		for n := 0; n < 2; n++ {
			ql, qh, sc := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32], blk[192+8*n:192+8*n+8]
			xb := x[b*q6kElems+128*n : b*q6kElems+128*n+128]
			var sub [8]float64 // Σ (q−32)·x per 16-value sub-block of this half
			for l := 0; l < 32; l++ {
				is := l / 16
				sub[is] += float64(int(ql[l]&15|(qh[l]&3)<<4)-32) * float64(xb[l])
				sub[is+2] += float64(int(ql[l+32]&15|(qh[l]>>2&3)<<4)-32) * float64(xb[l+32])
				sub[is+4] += float64(int(ql[l]>>4|(qh[l]>>4&3)<<4)-32) * float64(xb[l+64])
				sub[is+6] += float64(int(ql[l+32]>>4|(qh[l]>>6&3)<<4)-32) * float64(xb[l+96])
			}
			for i, v := range sub {
				acc += float64(int8(sc[i])) * v
			}
		}
		s += float64(f16At(blk[208:])) * acc
	}
	return s
}

// fitSymmetric is our version of ggml's make_qx_quants (rmse_type 1): levels
// L in [−nmax, nmax−1] with x ≈ scale·L, the largest magnitude on −nmax (the
// extra negative level), weights x², trying 19 reciprocal scales
// −(nmax + 0.1·i)/max, i in [−9, 9], each with its least-squares scale.
// Returns the (signed) scale.
func fitSymmetric(x []float32, nmax int, L []int8) float32 {
	var amax, maxv float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, maxv = a, v
		}
	}
	if amax < 1e-15 {
		clear(L)
		return 0
	}
	var aux [16]int8
	la := aux[:len(x)]
	try := func(iscale float32) (sumlx, suml2 float32) {
		for i, v := range x {
			l := clampInt(nearestInt(iscale*v), -nmax, nmax-1)
			la[i] = int8(l)
			w := v * v
			sumlx += w * v * float32(l)
			suml2 += w * float32(l*l)
		}
		return sumlx, suml2
	}
	var scale, best float32
	for is := -9; is <= 9; is++ {
		sumlx, suml2 := try(-(float32(nmax) + 0.1*float32(is)) / maxv)
		if suml2 > 0 && (best == 0 || sumlx*sumlx > best*suml2) {
			scale = sumlx / suml2
			best = scale * sumlx
			copy(L, la)
		}
	}
	return scale
}

// encodeQ6K follows ggml's quantize_row_q6_K_ref: fitSymmetric per 16-value
// sub-block, int8 scales relative to the largest (which lands on −128), and
// levels re-derived from the scales actually stored.
func encodeQ6K(src []float32, dst []byte) {
	var L [q6kElems]int8
	var scales [16]float32
	for b := 0; b*q6kElems < len(src); b++ {
		x := src[b*q6kElems : (b+1)*q6kElems]
		blk := dst[b*q6kBytes : (b+1)*q6kBytes]
		clear(blk)
		var amax, maxScale float32
		for ib := range scales {
			scales[ib] = fitSymmetric(x[16*ib:16*ib+16], 32, L[16*ib:16*ib+16])
			if a := abs32(scales[ib]); a > amax {
				amax, maxScale = a, scales[ib]
			}
		}
		if amax == 0 {
			clear(L[:])
		} else {
			iscale := -128 / maxScale
			d := putF16(blk[208:], 1/iscale)
			for ib := range scales {
				sc := int8(clampInt(nearestInt(iscale*scales[ib]), -128, 127))
				blk[192+ib] = byte(sc)
				dl := d * float32(sc)
				for i, v := range x[16*ib : 16*ib+16] {
					q := 0
					if dl != 0 {
						q = clampInt(nearestInt(v/dl), -32, 31)
					}
					L[16*ib+i] = int8(q)
				}
			}
		}
		for n := 0; n < 2; n++ {
			ql, qh := blk[64*n:64*n+64], blk[128+32*n:128+32*n+32]
			Ln := L[128*n : 128*n+128]
			for l := 0; l < 32; l++ {
				q1, q2 := uint8(Ln[l]+32), uint8(Ln[l+32]+32)
				q3, q4 := uint8(Ln[l+64]+32), uint8(Ln[l+96]+32)
				ql[l] = q1&15 | q3&15<<4
				ql[l+32] = q2&15 | q4&15<<4
				qh[l] = q1>>4 | q2>>4<<2 | q3>>4<<4 | q4>>4<<6
			}
		}
	}
}
