package quant

// Q8_0 (ggml type 8): blocks of 32, d f16 @0, qs int8[32] @2; y = d·q.

const (
	q80Elems = 32
	q80Bytes = 34
)

func decodeQ8_0(src []byte, dst []float32) {
	for b := 0; b*q80Elems < len(dst); b++ {
		blk := src[b*q80Bytes : (b+1)*q80Bytes]
		d := f16At(blk)
		y := dst[b*q80Elems : (b+1)*q80Elems]
		for j := range y {
			y[j] = d * float32(int8(blk[2+j]))
		}
	}
}

// encodeQ8_0 maps the largest magnitude to ±127. The levels are rounded
// against the f16 scale actually stored, not the exact one, which is what the
// decoder multiplies by.
func encodeQ8_0(src []float32, dst []byte) {
	for b := 0; b*q80Elems < len(src); b++ {
		x := src[b*q80Elems : (b+1)*q80Elems]
		blk := dst[b*q80Bytes : (b+1)*q80Bytes]
		var amax float32
		for _, v := range x {
			amax = max(amax, abs32(v))
		}
		d := putF16(blk, amax/127)
		var id float32
		if d != 0 {
			id = 1 / d
		}
		for j, v := range x {
			blk[2+j] = byte(int8(clampInt(nearestInt(v*id), -127, 127)))
		}
	}
}

func dotQ8_0(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*q80Elems < len(x); b++ {
		blk := src[b*q80Bytes : (b+1)*q80Bytes]
		xb := x[b*q80Elems : (b+1)*q80Elems]
		qs := blk[2 : 2+q80Elems]
		var acc float64
		for j, v := range xb {
			acc += float64(int8(qs[j])) * float64(v)
		}
		s += float64(f16At(blk)) * acc
	}
	return s
}

func abs32(v float32) float32 {
	if v < 0 {
		return -v
	}
	return v
}
