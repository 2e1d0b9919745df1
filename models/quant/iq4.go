package quant

import (
	"encoding/binary"
	"math"
)

// IQ4_NL (ggml type 20): blocks of 32, d f16 @0, qs[16] @2; the 4-bit codes
// index the non-uniform table kvalues_iq4nl: y[j] = d·kv[qs[j]&15],
// y[j+16] = d·kv[qs[j]>>4].
//
// IQ4_XS (ggml type 23): super-blocks of 256 = 8 IQ4_NL-like sub-blocks that
// share one f16 d and carry 6-bit signed scales: d f16 @0, scales_h u16 @2
// (2 high bits per sub-block), scales_l[4] @4 (4 low bits per sub-block),
// qs[128] @8; sub-block ib has dl = d·(ls−32).

const (
	iq4nlElems = 32
	iq4nlBytes = 18
	iq4xsElems = 256
	iq4xsBytes = 136
	// iq4Tries is ggml's ntry: the scale search tries the reciprocal scales
	// (t + kv[0])/max for t in [−7, 7].
	iq4Tries = 7
)

// kvIQ4 is kvalues_iq4nl as float32.
var kvIQ4 = func() (out [16]float32) {
	for i, v := range tables.kvaluesIQ4 {
		out[i] = float32(v)
	}
	return out
}()

// iq4Index returns the code whose table value is nearest to v.
func iq4Index(v float32) int {
	kv := &kvIQ4
	if v <= kv[0] {
		return 0
	}
	if v >= kv[15] {
		return 15
	}
	lo, hi := 0, 15
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		if v < kv[mid] {
			hi = mid
		} else {
			lo = mid
		}
	}
	if v-kv[lo] < kv[hi]-v {
		return lo
	}
	return hi
}

// iq4Search finds a scale d and codes L for one 32-value block minimising
// Σ w(x − d·kv[L])², following ggml's quantize_row_iq4_nl_impl: start with the
// largest magnitude on the table's largest level (−127), then try 2·iq4Tries
// nearby reciprocal scales; for each, the least-squares scale of the codes it
// produces. Returns 0 for an all-zero block.
//
// The race detector skips it (ten times its cost): it touches only x, w
// and L, which both callers read and write themselves where the detector
// sees it (iq4Importance, iq4Requant), and locals.
//
//go:norace
func iq4Search(x, w []float32, L []uint8) float32 {
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
	var lt [32]uint8
	aux := lt[:len(x)]
	try := func(id float32) (sumqx, sumq2 float32) {
		for j, v := range x {
			q := iq4Index(id * v)
			aux[j] = uint8(q)
			sumqx += w[j] * kvIQ4[q] * v
			sumq2 += w[j] * kvIQ4[q] * kvIQ4[q]
		}
		return sumqx, sumq2
	}
	sumqx, sumq2 := try(kvIQ4[0] / maxv)
	var d, best float32
	if sumq2 > 0 {
		d = sumqx / sumq2
		best = d * sumqx
	}
	copy(L, aux)
	for t := -iq4Tries; t <= iq4Tries; t++ {
		sumqx, sumq2 := try((float32(t) + kvIQ4[0]) / maxv)
		if sumq2 > 0 && sumqx*sumqx > best*sumq2 {
			d = sumqx / sumq2
			best = d * sumqx
			copy(L, aux)
		}
	}
	return d
}

// iq4Requant sets the codes nearest to x/d and returns Σ w(x − d·kv[L])².
func iq4Requant(x, w []float32, d float32, L []uint8) float32 {
	var id float32
	if d != 0 {
		id = 1 / d
	}
	var e float32
	for j, v := range x {
		q := iq4Index(id * v)
		L[j] = uint8(q)
		r := v - d*kvIQ4[q]
		e += w[j] * r * r
	}
	return e
}

// iq4Weights are ggml's importance weights without an imatrix: x², which
// spends the precision on the large weights that dominate a dot product.
func iq4Weights(x, w []float32) {
	for j, v := range x {
		w[j] = v * v
	}
}

// iq4Importance fills w for the (super-)block x that starts at element off
// of src: without an imatrix (qw nil) x²; with one, as ggml's
// quantize_row_iq4_nl_impl weighs its quant_weights, qw·sqrt(σ² + x²) with
// σ² twice the block's mean square.
func iq4Importance(x, qw []float32, off int, w []float32) {
	if qw == nil {
		iq4Weights(x, w)
		return
	}
	var sum2 float32
	for _, v := range x {
		sum2 += v * v
	}
	sigma2 := 2 * sum2 / float32(len(x))
	q := qw[off%len(qw):]
	for j, v := range x {
		w[j] = q[j] * float32(math.Sqrt(float64(sigma2+v*v)))
	}
}

func decodeIQ4NL(src []byte, dst []float32) {
	for b := 0; b*iq4nlElems < len(dst); b++ {
		blk := src[b*iq4nlBytes : (b+1)*iq4nlBytes]
		d := f16At(blk)
		y := dst[b*iq4nlElems : (b+1)*iq4nlElems]
		for j := 0; j < 16; j++ {
			q := blk[2+j]
			y[j] = d * kvIQ4[q&15]
			y[j+16] = d * kvIQ4[q>>4]
		}
	}
}

func encodeIQ4NL(src []float32, dst []byte) { encodeIQ4NLWeighted(src, nil, dst) }

// encodeIQ4NLWeighted is encodeIQ4NL with an importance matrix qw (weights
// per column of rows of len(qw); nil: none), see iq4Importance.
func encodeIQ4NLWeighted(src, qw []float32, dst []byte) {
	var w [32]float32
	var L [32]uint8
	for b := 0; b*iq4nlElems < len(src); b++ {
		x := src[b*iq4nlElems : (b+1)*iq4nlElems]
		blk := dst[b*iq4nlBytes : (b+1)*iq4nlBytes]
		iq4Importance(x, qw, b*iq4nlElems, w[:])
		d := putF16(blk, iq4Search(x, w[:], L[:]))
		iq4Requant(x, w[:], d, L[:]) // the codes nearest at the stored f16 scale
		for j := 0; j < 16; j++ {
			blk[2+j] = L[j] | L[j+16]<<4
		}
	}
}

// dotIQ4Nibbles is Σ kv[codes]·x over one 32-value (sub-)block of 16 bytes.
func dotIQ4Nibbles(qs []byte, x []float32) float64 {
	qs, x = qs[:16], x[:32]
	var acc float64
	for j := 0; j < 16; j++ {
		q := qs[j]
		acc += float64(kvIQ4[q&15])*float64(x[j]) + float64(kvIQ4[q>>4])*float64(x[j+16])
	}
	return acc
}

func dotIQ4NL(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*iq4nlElems < len(x); b++ {
		blk := src[b*iq4nlBytes : (b+1)*iq4nlBytes]
		s += float64(f16At(blk)) * dotIQ4Nibbles(blk[2:], x[b*iq4nlElems:])
	}
	return s
}

// iq4xsScale returns the 6-bit code ls (0..63) of sub-block ib.
func iq4xsScale(blk []byte, ib int) int {
	h := binary.LittleEndian.Uint16(blk[2:])
	return int(blk[4+ib/2]>>(4*(ib%2)))&15 | int(h>>(2*ib))&3<<4
}

func decodeIQ4XS(src []byte, dst []float32) {
	for b := 0; b*iq4xsElems < len(dst); b++ {
		blk := src[b*iq4xsBytes : (b+1)*iq4xsBytes]
		d := f16At(blk)
		for ib := 0; ib < 8; ib++ {
			dl := d * float32(iq4xsScale(blk, ib)-32)
			qs := blk[8+16*ib : 8+16*ib+16]
			y := dst[b*iq4xsElems+32*ib : b*iq4xsElems+32*ib+32]
			for j := 0; j < 16; j++ {
				y[j] = dl * kvIQ4[qs[j]&15]
				y[j+16] = dl * kvIQ4[qs[j]>>4]
			}
		}
	}
}

// encodeIQ4XS searches each sub-block's scale like IQ4_NL, then quantizes the
// eight scales to 6 bits against d = −max/32 (the largest lands on −32, the
// extra negative level), tries the neighbouring 6-bit codes for each
// sub-block, and requantizes its values at the scale finally stored.
func encodeIQ4XS(src []float32, dst []byte) { encodeIQ4XSWeighted(src, nil, dst) }

// encodeIQ4XSWeighted is encodeIQ4XS with an importance matrix qw (weights
// per column of rows of len(qw); nil: none), see iq4Importance.
func encodeIQ4XSWeighted(src, qw []float32, dst []byte) {
	var w [iq4xsElems]float32
	var L, tmp [32]uint8
	var scales [8]float32
	for b := 0; b*iq4xsElems < len(src); b++ {
		x := src[b*iq4xsElems : (b+1)*iq4xsElems]
		blk := dst[b*iq4xsBytes : (b+1)*iq4xsBytes]
		clear(blk)
		iq4Importance(x, qw, b*iq4xsElems, w[:])
		var amax, maxScale float32
		for ib := range scales {
			scales[ib] = iq4Search(x[32*ib:32*ib+32], w[32*ib:32*ib+32], L[:])
			if a := abs32(scales[ib]); a > amax {
				amax, maxScale = a, scales[ib]
			}
		}
		if amax == 0 {
			continue // d = 0 decodes to zeros whatever the codes
		}
		d := putF16(blk, -maxScale/32)
		if d == 0 {
			continue
		}
		id := 1 / d
		var scalesH uint16
		for ib := range scales {
			xb, wb := x[32*ib:32*ib+32], w[32*ib:32*ib+32]
			l0 := clampInt(nearestInt(id*scales[ib]), -32, 31)
			best, bestErr := l0, iq4Requant(xb, wb, d*float32(l0), L[:])
			for _, l := range [2]int{l0 - 1, l0 + 1} {
				if l < -32 || l > 31 {
					continue
				}
				if e := iq4Requant(xb, wb, d*float32(l), tmp[:]); e < bestErr {
					best, bestErr = l, e
					L = tmp
				}
			}
			ls := best + 32
			blk[4+ib/2] |= byte(ls&15) << (4 * (ib % 2))
			scalesH |= uint16(ls>>4) << (2 * ib)
			qs := blk[8+16*ib:]
			for j := 0; j < 16; j++ {
				qs[j] = L[j] | L[j+16]<<4
			}
		}
		binary.LittleEndian.PutUint16(blk[2:], scalesH)
	}
}

func dotIQ4XS(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*iq4xsElems < len(x); b++ {
		blk := src[b*iq4xsBytes : (b+1)*iq4xsBytes]
		d := f16At(blk)
		var acc float64
		for ib := 0; ib < 8; ib++ {
			acc += float64(iq4xsScale(blk, ib)-32) * dotIQ4Nibbles(blk[8+16*ib:], x[b*iq4xsElems+32*ib:])
		}
		s += float64(d) * acc
	}
	return s
}
