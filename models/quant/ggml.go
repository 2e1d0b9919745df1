package quant

import (
	"fmt"
	"math"
	"sort"
)

// GGMLType describes a ggml tensor type by its block geometry. It covers the
// types a GGUF file may carry, including those strata has no codec for, so a
// GGUF reader can size and validate every tensor it meets.
type GGMLType struct {
	Code       int
	Name       string // ggml's name, e.g. "q4_K"
	BlockElems int
	BlockBytes int
}

// ggmlTypes lists ggml's type ids (ggml.h enum ggml_type; retired ids 4, 5 and
// 31–33, 36–38 are absent). Quantized block sizes come from the block_sizes of
// the embedded ggml_tables.json; the plain types are their element sizes.
var ggmlTypes = func() map[int]GGMLType {
	plain := []struct {
		code  int
		name  string
		bytes int
	}{
		{0, "f32", 4}, {1, "f16", 2}, {24, "i8", 1}, {25, "i16", 2}, {26, "i32", 4},
		{27, "i64", 8}, {28, "f64", 8}, {30, "bf16", 2},
	}
	blocks := []struct {
		code          int
		name, cstruct string
	}{
		{2, "q4_0", "block_q4_0"}, {3, "q4_1", "block_q4_1"}, {6, "q5_0", "block_q5_0"},
		{7, "q5_1", "block_q5_1"}, {8, "q8_0", "block_q8_0"}, {9, "q8_1", "block_q8_1"},
		{10, "q2_K", "block_q2_K"}, {11, "q3_K", "block_q3_K"}, {12, "q4_K", "block_q4_K"},
		{13, "q5_K", "block_q5_K"}, {14, "q6_K", "block_q6_K"}, {15, "q8_K", "block_q8_K"},
		{16, "iq2_xxs", "block_iq2_xxs"}, {17, "iq2_xs", "block_iq2_xs"},
		{18, "iq3_xxs", "block_iq3_xxs"}, {19, "iq1_s", "block_iq1_s"},
		{20, "iq4_nl", "block_iq4_nl"}, {21, "iq3_s", "block_iq3_s"}, {22, "iq2_s", "block_iq2_s"},
		{23, "iq4_xs", "block_iq4_xs"}, {29, "iq1_m", "block_iq1_m"},
		{34, "tq1_0", "block_tq1_0"}, {35, "tq2_0", "block_tq2_0"}, {39, "mxfp4", "block_mxfp4"},
	}
	m := map[int]GGMLType{}
	for _, p := range plain {
		m[p.code] = GGMLType{p.code, p.name, 1, p.bytes}
	}
	for _, b := range blocks {
		elems, bytes := blockOf(b.cstruct)
		if elems == 0 || bytes == 0 {
			panic("quant: ggml_tables.json has no block size for " + b.cstruct)
		}
		m[b.code] = GGMLType{b.code, b.name, elems, bytes}
	}
	return m
}()

// GGMLTypeByCode returns the geometry of ggml type code, or an error for an
// id ggml does not define (or one newer than our tables).
func GGMLTypeByCode(code int) (GGMLType, error) {
	if t, ok := ggmlTypes[code]; ok {
		return t, nil
	}
	codes := make([]int, 0, len(ggmlTypes))
	for c := range ggmlTypes {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	return GGMLType{}, fmt.Errorf("unknown ggml type %d (known: %v)", code, codes)
}

// RowBytes is the storage size of a row of n elements, or an error when n is
// not a whole number of blocks.
func (t GGMLType) RowBytes(n int64) (int64, error) {
	if n < 0 || n%int64(t.BlockElems) != 0 {
		return 0, fmt.Errorf("row of %d elements is not a multiple of the %s block size %d", n, t.Name, t.BlockElems)
	}
	blocks := n / int64(t.BlockElems)
	if blocks > math.MaxInt64/int64(t.BlockBytes) {
		return 0, fmt.Errorf("row of %d %s elements overflows int64 bytes", n, t.Name)
	}
	return blocks * int64(t.BlockBytes), nil
}
