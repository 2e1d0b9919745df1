package quant

import "encoding/binary"

// IQ2_XXS (ggml type 16), 66 bytes per 256: d f16 @0, then per 32 elements
// two uint32 (8 bytes @2 + 8·ib): the first holds four 8-bit indices into
// iq2xxs_grid (eight magnitudes each), the second four 7-bit indices into
// ksigns_iq2xs (bits 7l … 7l + 6, the signs of grid point l) and a 4-bit
// scale s in its top bits; y = d·(0.5 + s)·0.25·grid·sign.
//
// IQ3_XXS (ggml type 18), 98 bytes per 256: d f16 @0, 64 bytes of 8-bit
// indices into iq3xxs_grid (four magnitudes each) @2, eight for each 32
// elements, then a uint32 per 32 elements @66 + 4·ib: four 7-bit sign indices
// (one per eight elements, as IQ2_XXS) and the 4-bit scale in the top bits;
// y = d·(0.5 + s)·0.5·grid·sign.
//
// Decoder and dot product (iq_dot.go), no quantizer: Encode is nil and
// quant plans refuse them; files that hold them run as they are.

const (
	iq2xxsBytes = 66
	iq3xxsBytes = 98
)

// signed is v negated when bit j of the sign pattern is set.
func signed(v float32, signs uint8, j int) float32 {
	if signs>>j&1 != 0 {
		return -v
	}
	return v
}

func decodeIQ2XXS(src []byte, dst []float32) {
	for b := 0; b*256 < len(dst); b++ {
		blk := src[b*iq2xxsBytes : (b+1)*iq2xxsBytes]
		d := f16At(blk)
		for ib := 0; ib < 8; ib++ {
			idx := blk[2+8*ib : 2+8*ib+4]
			aux := binary.LittleEndian.Uint32(blk[2+8*ib+4:])
			db := d * (0.5 + float32(aux>>28)) * 0.25
			for l := 0; l < 4; l++ {
				grid := tables.iq2xxsGrid[idx[l]]
				signs := tables.ksigns[aux>>(7*l)&127]
				y := dst[b*256+32*ib+8*l : b*256+32*ib+8*l+8]
				for j := range y {
					y[j] = signed(db*float32(uint8(grid>>(8*j))), signs, j)
				}
			}
		}
	}
}

func decodeIQ3XXS(src []byte, dst []float32) {
	for b := 0; b*256 < len(dst); b++ {
		blk := src[b*iq3xxsBytes : (b+1)*iq3xxsBytes]
		d := f16At(blk)
		for ib := 0; ib < 8; ib++ {
			idx := blk[2+8*ib : 2+8*ib+8]
			aux := binary.LittleEndian.Uint32(blk[66+4*ib:])
			db := d * (0.5 + float32(aux>>28)) * 0.5
			for l := 0; l < 4; l++ {
				signs := tables.ksigns[aux>>(7*l)&127]
				g1, g2 := tables.iq3xxsGrid[idx[2*l]], tables.iq3xxsGrid[idx[2*l+1]]
				y := dst[b*256+32*ib+8*l : b*256+32*ib+8*l+8]
				for j := 0; j < 4; j++ {
					y[j] = signed(db*float32(uint8(g1>>(8*j))), signs, j)
					y[j+4] = signed(db*float32(uint8(g2>>(8*j))), signs, j+4)
				}
			}
		}
	}
}
