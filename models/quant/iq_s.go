package quant

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// IQ2_S (ggml type 22), 82 bytes per 256: d f16 @0, qs[64] @2 (32 low bytes
// of 10-bit iq2s_grid indices, one per 8 elements, then 32 sign bytes, bit j
// negating element j), qh[8] @66 (per 32 elements the two high bits of each
// of its four indices, bits 2l … 2l+1), scales[8] @74 (per 32 elements, low
// nibble for the first 16, high for the last); y = d·(0.5 + s)·0.25·grid·sign.
//
// IQ3_S (ggml type 21), 110 bytes per 256: d f16 @0, qs[64] @2 (low bytes of
// 9-bit iq3s_grid indices, one per 4 elements), qh[8] @66 (bit k of qh[ib]:
// the ninth bit of index k of 32-element group ib), signs[32] @74 (one byte
// per 8 elements), scales[4] @106 (per 64 elements, a nibble per 32);
// y = d·(1 + 2s)·grid·sign.
//
// IQ1_S (ggml type 19), 50 bytes per 256: d f16 @0, qs[32] @2 (low bytes of
// 11-bit iq1s_grid indices, one per 8 elements), qh u16[8] @34 (per 32
// elements: bits 3l … 3l+2 the index's high bits, bits 12–14 a scale s, bit
// 15 the sign of the shift); y = d·(2s + 1)·(grid ± 0.125), grid in {−1, 0, 1}.
//
// IQ1_M (ggml type 29), 56 bytes per 256: qs[32] @0, qh[16] @32 (per 8
// elements a nibble: three high index bits and a shift sign, bit 3), scales
// @48 as four u16: 3-bit scales, one per 16 elements (bits 3k … 3k+2 of u16
// k/4, …), and the f16 d spread over their top nibbles;
// y = d·(2s + 1)·(grid ± 0.125).
//
// Decoder and dot product (iq_dot.go), no quantizer. The grids are not in ../shared: ggml_iq_grids.json.gz holds them as data taken
// from ggml-common.h (its "source" says which tree).

const (
	iq2sBytes = 82
	iq3sBytes = 110
	iq1sBytes = 50
	iq1mBytes = 56
	iq1sDelta = 0.125
	iq1sNGrid = 2048
	iq2sNGrid = 1024
	iq3sNGrid = 512
)

// The grids' JSON is stored gzipped (88 KB → 11 KB of the tree a GPU
// call carries).
//
//go:embed ggml_iq_grids.json.gz
var iqGridsGzip []byte

type iqGrids struct {
	iq2s [iq2sNGrid]uint64
	iq3s [iq3sNGrid]uint32
	iq1s [iq1sNGrid]uint64
}

var grids = func() *iqGrids {
	zr, err := gzip.NewReader(bytes.NewReader(iqGridsGzip))
	if err != nil {
		panic("quant: embedded ggml_iq_grids.json.gz: " + err.Error())
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		panic("quant: embedded ggml_iq_grids.json.gz: " + err.Error())
	}
	g, err := parseIQGrids(raw)
	if err != nil {
		panic("quant: embedded ggml_iq_grids.json.gz: " + err.Error())
	}
	return g
}()

func parseIQGrids(raw []byte) (*iqGrids, error) {
	var doc tableDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	read := func(name, typ string, n int, levels map[uint8]bool, width int, put func(i int, v uint64)) error {
		return doc.values(name, typ, n, func(i int, v uint64, neg bool) error {
			if neg || typ == "uint32" && v > 0xffffffff {
				return fmt.Errorf("not a %s", typ)
			}
			for j := 0; j < width; j++ {
				if !levels[uint8(v>>(8*j))] {
					return fmt.Errorf("byte %d is %d, not a level of the grid", j, uint8(v>>(8*j)))
				}
			}
			put(i, v)
			return nil
		})
	}
	g := &iqGrids{}
	if err := read("iq2s_grid", "uint64", iq2sNGrid, map[uint8]bool{8: true, 25: true, 43: true}, 8, func(i int, v uint64) { g.iq2s[i] = v }); err != nil {
		return nil, err
	}
	odd := map[uint8]bool{1: true, 3: true, 5: true, 7: true, 9: true, 11: true, 13: true, 15: true}
	if err := read("iq3s_grid", "uint32", iq3sNGrid, odd, 4, func(i int, v uint64) { g.iq3s[i] = uint32(v) }); err != nil {
		return nil, err
	}
	trits := map[uint8]bool{0: true, 1: true, 0xff: true} // int8 −1, 0, 1
	if err := read("iq1s_grid", "uint64", iq1sNGrid, trits, 8, func(i int, v uint64) { g.iq1s[i] = v }); err != nil {
		return nil, err
	}
	return g, nil
}

func decodeIQ2S(src []byte, dst []float32) {
	for b := 0; b*256 < len(dst); b++ {
		blk := src[b*iq2sBytes : (b+1)*iq2sBytes]
		d := f16At(blk)
		qs, signs, qh, sc := blk[2:34], blk[34:66], blk[66:74], blk[74:82]
		for ib := 0; ib < 8; ib++ {
			db := [2]float32{d * (0.5 + float32(sc[ib]&15)) * 0.25, d * (0.5 + float32(sc[ib]>>4)) * 0.25}
			for l := 0; l < 4; l++ {
				idx := int(qs[4*ib+l]) | int(qh[ib])<<(8-2*l)&0x300
				grid := grids.iq2s[idx]
				s := signs[4*ib+l]
				y := dst[b*256+32*ib+8*l : b*256+32*ib+8*l+8]
				for j := range y {
					y[j] = signed(db[l/2]*float32(uint8(grid>>(8*j))), s, j)
				}
			}
		}
	}
}

func decodeIQ3S(src []byte, dst []float32) {
	for b := 0; b*256 < len(dst); b++ {
		blk := src[b*iq3sBytes : (b+1)*iq3sBytes]
		d := f16At(blk)
		qs, qh, signs, sc := blk[2:66], blk[66:74], blk[74:106], blk[106:110]
		for ib := 0; ib < 8; ib++ {
			db := d * float32(1+2*int(sc[ib/2]>>(4*(ib%2))&15))
			for l := 0; l < 4; l++ {
				i1 := int(qs[8*ib+2*l]) | int(qh[ib])<<(8-2*l)&256
				i2 := int(qs[8*ib+2*l+1]) | int(qh[ib])<<(7-2*l)&256
				g1, g2 := grids.iq3s[i1], grids.iq3s[i2]
				s := signs[4*ib+l]
				y := dst[b*256+32*ib+8*l : b*256+32*ib+8*l+8]
				for j := 0; j < 4; j++ {
					y[j] = signed(db*float32(uint8(g1>>(8*j))), s, j)
					y[j+4] = signed(db*float32(uint8(g2>>(8*j))), s, j+4)
				}
			}
		}
	}
}

func decodeIQ1S(src []byte, dst []float32) {
	for b := 0; b*256 < len(dst); b++ {
		blk := src[b*iq1sBytes : (b+1)*iq1sBytes]
		d := f16At(blk)
		for ib := 0; ib < 8; ib++ {
			qh := binary.LittleEndian.Uint16(blk[34+2*ib:])
			dl := d * float32(2*int(qh>>12&7)+1)
			delta := float32(iq1sDelta)
			if qh&0x8000 != 0 {
				delta = -iq1sDelta
			}
			for l := 0; l < 4; l++ {
				grid := grids.iq1s[int(blk[2+4*ib+l])|int(qh>>(3*l)&7)<<8]
				y := dst[b*256+32*ib+8*l : b*256+32*ib+8*l+8]
				for j := range y {
					y[j] = dl * (float32(int8(grid>>(8*j))) + delta)
				}
			}
		}
	}
}

func decodeIQ1M(src []byte, dst []float32) {
	for b := 0; b*256 < len(dst); b++ {
		blk := src[b*iq1mBytes : (b+1)*iq1mBytes]
		var sc [4]uint16
		for k := range sc {
			sc[k] = binary.LittleEndian.Uint16(blk[48+2*k:])
		}
		d := F16ToF32(sc[0]>>12 | sc[1]>>8&0x00f0 | sc[2]>>4&0x0f00 | sc[3]&0xf000)
		for ib := 0; ib < 8; ib++ {
			s := sc[ib/2] >> (6 * (ib % 2))
			dl := [2]float32{d * float32(2*int(s&7)+1), d * float32(2*int(s>>3&7)+1)}
			for l := 0; l < 4; l++ {
				h := blk[32+2*ib+l/2] >> (4 * (l % 2)) // three index bits, then the shift's sign
				delta := float32(iq1sDelta)
				if h&8 != 0 {
					delta = -iq1sDelta
				}
				grid := grids.iq1s[int(blk[4*ib+l])|int(h&7)<<8]
				y := dst[b*256+32*ib+8*l : b*256+32*ib+8*l+8]
				for j := range y {
					y[j] = dl[l/2] * (float32(int8(grid>>(8*j))) + delta)
				}
			}
		}
	}
}

// IQ2SGrid returns iq2s_grid: 1024 entries of eight magnitudes (byte j,
// little-endian, is element j), for the MSL decoders' constant tables.
func IQ2SGrid() [iq2sNGrid]uint64 { return grids.iq2s }

// IQ3SGrid returns iq3s_grid: 512 entries of four magnitudes.
func IQ3SGrid() [iq3sNGrid]uint32 { return grids.iq3s }

// IQ1SGrid returns iq1s_grid: 2048 entries of eight int8 values in {−1, 0, 1}.
func IQ1SGrid() [iq1sNGrid]uint64 { return grids.iq1s }
