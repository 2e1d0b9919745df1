package quant

import "encoding/binary"

// The decode-only IQ formats' reference dot products: per eight elements
// Σ ±grid·x in float64 with the grid's small integer magnitudes, times the
// sub-block scale the decoder computes (the same float32 value), so the
// result differs from a float64 dot of the decoded float32 values by the
// decoder's rounding of scale·grid only. No scratch, no allocation.

// dotGrid8 is Σ_j ±g_j·x_j over eight elements: g_j byte j of grid, negated
// where bit j of signs is set.
func dotGrid8(grid uint64, signs uint8, x []float32) float64 {
	x = x[:8]
	var s float64
	for j := range 8 {
		v := float64(uint8(grid>>(8*j))) * float64(x[j])
		if signs>>j&1 != 0 {
			v = -v
		}
		s += v
	}
	return s
}

// dotGrid4x2 is dotGrid8 for two four-magnitude grid points (IQ3_XXS, IQ3_S).
func dotGrid4x2(g1, g2 uint32, signs uint8, x []float32) float64 {
	return dotGrid8(uint64(g1)|uint64(g2)<<32, signs, x)
}

func dotIQ2XXS(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*256 < len(x); b++ {
		blk := src[b*iq2xxsBytes : (b+1)*iq2xxsBytes]
		d := f16At(blk)
		for ib := 0; ib < 8; ib++ {
			idx := blk[2+8*ib : 2+8*ib+4]
			aux := binary.LittleEndian.Uint32(blk[2+8*ib+4:])
			db := d * (0.5 + float32(aux>>28)) * 0.25
			var acc float64
			for l := 0; l < 4; l++ {
				acc += dotGrid8(tables.iq2xxsGrid[idx[l]], tables.ksigns[aux>>(7*l)&127], x[b*256+32*ib+8*l:])
			}
			s += float64(db) * acc
		}
	}
	return s
}

func dotIQ3XXS(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*256 < len(x); b++ {
		blk := src[b*iq3xxsBytes : (b+1)*iq3xxsBytes]
		d := f16At(blk)
		for ib := 0; ib < 8; ib++ {
			idx := blk[2+8*ib : 2+8*ib+8]
			aux := binary.LittleEndian.Uint32(blk[66+4*ib:])
			db := d * (0.5 + float32(aux>>28)) * 0.5
			var acc float64
			for l := 0; l < 4; l++ {
				acc += dotGrid4x2(tables.iq3xxsGrid[idx[2*l]], tables.iq3xxsGrid[idx[2*l+1]], tables.ksigns[aux>>(7*l)&127], x[b*256+32*ib+8*l:])
			}
			s += float64(db) * acc
		}
	}
	return s
}

func dotIQ2S(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*256 < len(x); b++ {
		blk := src[b*iq2sBytes : (b+1)*iq2sBytes]
		d := f16At(blk)
		qs, signs, qh, sc := blk[2:34], blk[34:66], blk[66:74], blk[74:82]
		for ib := 0; ib < 8; ib++ {
			db := [2]float32{d * (0.5 + float32(sc[ib]&15)) * 0.25, d * (0.5 + float32(sc[ib]>>4)) * 0.25}
			for half := 0; half < 2; half++ {
				var acc float64
				for l := 2 * half; l < 2*half+2; l++ {
					idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
					acc += dotGrid8(grids.iq2s[idx], signs[4*ib+l], x[b*256+32*ib+8*l:])
				}
				s += float64(db[half]) * acc
			}
		}
	}
	return s
}

func dotIQ3S(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*256 < len(x); b++ {
		blk := src[b*iq3sBytes : (b+1)*iq3sBytes]
		d := f16At(blk)
		qs, qh, signs, sc := blk[2:66], blk[66:74], blk[74:106], blk[106:110]
		for ib := 0; ib < 8; ib++ {
			db := d * float32(1+2*int(sc[ib/2]>>(4*(ib%2))&15))
			var acc float64
			for l := 0; l < 4; l++ {
				i1 := int(qs[8*ib+2*l]) | int(qh[ib])<<(8-2*l)&256
				i2 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<(7-2*l)&256
				acc += dotGrid4x2(grids.iq3s[i1], grids.iq3s[i2], signs[4*ib+l], x[b*256+32*ib+8*l:])
			}
			s += float64(db) * acc
		}
	}
	return s
}

// dotTrits8 is Σ_j (g_j + delta)·x_j over eight elements, g_j the int8 byte
// j of an iq1s_grid entry (−1, 0 or 1).
func dotTrits8(grid uint64, delta float64, x []float32) float64 {
	x = x[:8]
	var s float64
	for j := range 8 {
		s += (float64(int8(grid>>(8*j))) + delta) * float64(x[j])
	}
	return s
}

func dotIQ1S(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*256 < len(x); b++ {
		blk := src[b*iq1sBytes : (b+1)*iq1sBytes]
		d := f16At(blk)
		for ib := 0; ib < 8; ib++ {
			qh := binary.LittleEndian.Uint16(blk[34+2*ib:])
			dl := d * float32(2*int(qh>>12&7)+1)
			delta := float64(iq1sDelta)
			if qh&0x8000 != 0 {
				delta = -iq1sDelta
			}
			var acc float64
			for l := 0; l < 4; l++ {
				acc += dotTrits8(grids.iq1s[int(blk[2+4*ib+l])|int(qh>>(3*l)&7)<<8], delta, x[b*256+32*ib+8*l:])
			}
			s += float64(dl) * acc
		}
	}
	return s
}

func dotIQ1M(src []byte, x []float32) float64 {
	var s float64
	for b := 0; b*256 < len(x); b++ {
		blk := src[b*iq1mBytes : (b+1)*iq1mBytes]
		var sc [4]uint16
		for k := range sc {
			sc[k] = binary.LittleEndian.Uint16(blk[48+2*k:])
		}
		d := F16ToF32(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000)
		for ib := 0; ib < 8; ib++ {
			sh := sc[ib/2] >> (6 * (ib % 2))
			dl := [2]float32{d * float32(2*int(sh&7)+1), d * float32(2*int(sh>>3&7)+1)}
			for half := 0; half < 2; half++ {
				var acc float64
				for l := 2 * half; l < 2*half+2; l++ {
					h := blk[32+2*ib+l/2] >> (4 * (l % 2))
					delta := float64(iq1sDelta)
					if h&8 != 0 {
						delta = -iq1sDelta
					}
					acc += dotTrits8(grids.iq1s[int(blk[4*ib+l])|int(h&7)<<8], delta, x[b*256+32*ib+8*l:])
				}
				s += float64(dl[half]) * acc
			}
		}
	}
	return s
}
