package quant

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math/bits"
	"strconv"
)

// ggmlTablesJSON is a verbatim copy of ../shared/specs/ggml_tables.json: the
// lookup tables of ggml-common.h, kept as data so nobody hand-types a grid.
//
//go:embed ggml_tables.json
var ggmlTablesJSON []byte

// ggmlTables holds the parsed tables. They are parsed and checked once, at
// package init: the file is part of the build, so a bad copy is a build bug.
type ggmlTables struct {
	iq2xsGrid  [512]uint64 // 8 magnitudes per entry, byte j little-endian
	iq2xxsGrid [256]uint64 // IQ2_XXS: 8 magnitudes per entry, as iq2xsGrid
	iq3xxsGrid [256]uint32 // IQ3_XXS: 4 magnitudes per entry, byte j little-endian
	ksigns     [128]uint8  // 7-bit sign index → 8 sign bits (even parity)
	kmask      [8]uint8
	kvaluesIQ4 [16]int8
	qkK        int
	qk80       int
	qk4NL      int
	kScaleSize int
	blockSizes map[string]blockSize
}

type blockSize struct{ bytes, elements int }

var tables = mustParseTables(ggmlTablesJSON)

func mustParseTables(raw []byte) *ggmlTables {
	t, err := parseTables(raw)
	if err != nil {
		panic("quant: embedded ggml_tables.json: " + err.Error())
	}
	return t
}

// tableDoc is the part of ggml_tables.json and ggml_iq_grids.json(.gz) that
// holds the tables: each by name, with its C element type and values.
type tableDoc struct {
	Tables map[string]struct {
		Type   string            `json:"type"`
		Values []json.RawMessage `json:"values"`
	} `json:"tables"`
	Declared map[string]int `json:"declared_sizes"`
}

// values decodes table name (n entries) through put, checking the declared
// size and the element type; put checks each value's range.
func (d *tableDoc) values(name, typ string, n int, put func(i int, v uint64, neg bool) error) error {
	tb, ok := d.Tables[name]
	if !ok {
		return fmt.Errorf("table %s missing", name)
	}
	if tb.Type != typ {
		return fmt.Errorf("table %s: type %q, want %q", name, tb.Type, typ)
	}
	if len(tb.Values) != n || d.Declared[name] != n {
		return fmt.Errorf("table %s: %d values (declared %d), want %d", name, len(tb.Values), d.Declared[name], n)
	}
	for i, rv := range tb.Values {
		var v uint64
		neg := false
		var s string
		if json.Unmarshal(rv, &s) == nil { // uint64 tables are "0x…" strings
			u, err := strconv.ParseUint(s, 0, 64)
			if err != nil {
				return fmt.Errorf("table %s[%d]: %w", name, i, err)
			}
			v = u
		} else {
			var x int64
			if err := json.Unmarshal(rv, &x); err != nil {
				return fmt.Errorf("table %s[%d]: %w", name, i, err)
			}
			if x < 0 {
				neg, v = true, uint64(-x)
			} else {
				v = uint64(x)
			}
		}
		if err := put(i, v, neg); err != nil {
			return fmt.Errorf("table %s[%d]: %w", name, i, err)
		}
	}
	return nil
}

func parseTables(raw []byte) (*ggmlTables, error) {
	var doc struct {
		tableDoc
		Constants  map[string]int `json:"constants"`
		BlockSizes map[string]struct {
			Bytes    int `json:"bytes"`
			Elements int `json:"elements"`
		} `json:"block_sizes"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, err
	}
	t := &ggmlTables{blockSizes: map[string]blockSize{}}
	values := doc.values
	u8 := func(dst []uint8) func(int, uint64, bool) error {
		return func(i int, v uint64, neg bool) error {
			if neg || v > 255 {
				return fmt.Errorf("value out of uint8 range")
			}
			dst[i] = uint8(v)
			return nil
		}
	}
	if err := values("iq2xs_grid", "uint64", 512, func(i int, v uint64, _ bool) error {
		t.iq2xsGrid[i] = v
		return nil
	}); err != nil {
		return nil, err
	}
	if err := values("iq2xxs_grid", "uint64", 256, func(i int, v uint64, _ bool) error {
		t.iq2xxsGrid[i] = v
		return nil
	}); err != nil {
		return nil, err
	}
	if err := values("iq3xxs_grid", "uint32", 256, func(i int, v uint64, neg bool) error {
		if neg || v > 0xffffffff {
			return fmt.Errorf("value out of uint32 range")
		}
		t.iq3xxsGrid[i] = uint32(v)
		return nil
	}); err != nil {
		return nil, err
	}
	if err := values("ksigns_iq2xs", "uint8", 128, u8(t.ksigns[:])); err != nil {
		return nil, err
	}
	if err := values("kmask_iq2xs", "uint8", 8, u8(t.kmask[:])); err != nil {
		return nil, err
	}
	if err := values("kvalues_iq4nl", "int8", 16, func(i int, v uint64, neg bool) error {
		switch {
		case neg && v <= 128:
			t.kvaluesIQ4[i] = int8(-int64(v))
		case !neg && v <= 127:
			t.kvaluesIQ4[i] = int8(v)
		default:
			return fmt.Errorf("value out of int8 range")
		}
		return nil
	}); err != nil {
		return nil, err
	}
	for name, bs := range doc.BlockSizes {
		t.blockSizes[name] = blockSize{bs.Bytes, bs.Elements}
	}
	t.qkK, t.qk80, t.qk4NL, t.kScaleSize = doc.Constants["QK_K"], doc.Constants["QK8_0"], doc.Constants["QK4_NL"], doc.Constants["K_SCALE_SIZE"]
	return t, t.check()
}

// check asserts the properties the codecs rely on, so a wrong table fails
// loudly instead of quantizing garbage.
func (t *ggmlTables) check() error {
	if t.qkK != 256 || t.qk80 != 32 || t.qk4NL != 32 || t.kScaleSize != 12 {
		return fmt.Errorf("constants QK_K=%d QK8_0=%d QK4_NL=%d K_SCALE_SIZE=%d, want 256, 32, 32, 12", t.qkK, t.qk80, t.qk4NL, t.kScaleSize)
	}
	// The IQ2_XXS grid shares IQ2_XS's magnitudes; IQ3_XXS's are
	// 4, 12, …, 52 and 62.
	for _, gr := range []struct {
		name string
		grid []uint64
	}{{"iq2xs_grid", t.iq2xsGrid[:]}, {"iq2xxs_grid", t.iq2xxsGrid[:]}} {
		for i, g := range gr.grid {
			for j := 0; j < 8; j++ {
				if b := uint8(g >> (8 * j)); b != 8 && b != 25 && b != 43 {
					return fmt.Errorf("%s[%d] byte %d is %d, not one of 8, 25, 43", gr.name, i, j, b)
				}
			}
		}
	}
	seen := map[uint64]bool{}
	for i, g := range t.iq2xsGrid {
		if seen[g] {
			return fmt.Errorf("iq2xs_grid[%d] repeats an earlier entry", i)
		}
		seen[g] = true
	}
	for i, g := range t.iq3xxsGrid {
		for j := 0; j < 4; j++ {
			if b := uint8(g >> (8 * j)); b < 4 || b > 62 || b%2 != 0 {
				return fmt.Errorf("iq3xxs_grid[%d] byte %d is %d, not an even level in 4 … 62", i, j, b)
			}
		}
	}
	for i, m := range t.kmask {
		if m != 1<<i {
			return fmt.Errorf("kmask_iq2xs[%d] = %d, want %d", i, m, 1<<i)
		}
	}
	// The encoder inverts ksigns; that needs distinct, even-parity patterns.
	var used [256]bool
	for i, s := range t.ksigns {
		if bits.OnesCount8(s)%2 != 0 || used[s] {
			return fmt.Errorf("ksigns_iq2xs[%d] = %#x: not a distinct even-parity sign pattern", i, s)
		}
		used[s] = true
	}
	for i := 1; i < 16; i++ {
		if t.kvaluesIQ4[i] <= t.kvaluesIQ4[i-1] {
			return fmt.Errorf("kvalues_iq4nl is not increasing at %d", i)
		}
	}
	for _, need := range []string{"block_q8_0", "block_q4_K", "block_q6_K", "block_iq2_xs", "block_iq4_nl", "block_iq4_xs"} {
		if _, ok := t.blockSizes[need]; !ok {
			return fmt.Errorf("block_sizes has no %s", need)
		}
	}
	return nil
}

// blockOf returns the (elements, bytes) of a ggml block struct from the data
// file; the registry takes its block layouts from here.
func blockOf(name string) (elems, bytes int) {
	b := tables.blockSizes[name]
	return b.elements, b.bytes
}

// The lookup tables for code generators (the MSL decoders' constant
// tables, gen/msl_formats.go), as parsed and checked from the embedded
// ggml_tables.json; each call returns a copy.

// IQ2XSGrid returns iq2xs_grid: 512 entries of eight magnitudes, byte j of an
// entry (little-endian) being the magnitude of element j.
func IQ2XSGrid() [512]uint64 { return tables.iq2xsGrid }

// IQ2XXSGrid returns iq2xxs_grid: 256 entries of eight magnitudes, byte j
// (little-endian) being element j.
func IQ2XXSGrid() [256]uint64 { return tables.iq2xxsGrid }

// IQ3XXSGrid returns iq3xxs_grid: 256 entries of four magnitudes, byte j
// (little-endian) being element j.
func IQ3XXSGrid() [256]uint32 { return tables.iq3xxsGrid }

// IQ2XSSigns returns ksigns_iq2xs: a 7-bit sign index to the 8-bit sign
// pattern (bit j set: element j is negative; even parity).
func IQ2XSSigns() [128]uint8 { return tables.ksigns }

// IQ4NLValues returns kvalues_iq4nl: the 16 levels of a 4-bit IQ4_NL or
// IQ4_XS code.
func IQ4NLValues() [16]int8 { return tables.kvaluesIQ4 }
