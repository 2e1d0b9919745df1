package quant

import (
	"fmt"
	"strings"
	"sync"
)

// Rows whose length is not a multiple of a format's block size (the 640-wide
// rows of Qwen3.8-Flash-Next's expert down projection under a 256-element
// format, tiny-go's 16-wide rows under any block format) cannot be stored in
// that format as they are. Two remedies:
//
//   - Fallback, the default: store the tensor in the format llama.cpp's
//     quantizer falls back to (v0.5.0's tensor_type_fallback): the 256-block
//     IQ types go to IQ4_NL, Q2_K and Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to
//     Q5_1, Q6_K to Q8_0; a 32-block type keeps its format; and where the
//     result still does not divide the row (rows that are not multiples of
//     32), F16. The files are valid GGUFs (ggml requires ne[0] to be a
//     multiple of the block size), so llama.cpp reads them.
//   - Pad: keep the format and zero-pad each row to whole blocks. The padding
//     decodes to values that multiply nothing (RowLayout.Dot and DecodeRow
//     stop at the real length), so nothing changes numerically; the cost is
//     the padding's bytes, and the stored tensor is wider than the model's,
//     which no GGUF reader but strata's accepts. Older strata wrote such
//     files (the rows' lengths in strata.row_length.* keys) and they still
//     load; strata convert and synth no longer write them (runtime/tools/convert
//     refuses a padded layout), so Pad serves in-memory plans and reading.
//
// Smallest picks whichever stores the row in fewer bytes (the fallback on a
// tie); it pads where padding is smaller, so it too is in-memory only.

// RowPolicy chooses the remedy for rows that are not whole blocks.
type RowPolicy int

const (
	Fallback RowPolicy = iota // the default: llama.cpp's fallback format
	Pad                       // zero-pad rows to whole blocks; strata-only, never written
	Smallest                  // fewer bytes of Pad and Fallback; may pad, never written
)

// String names the policy as flags and docs spell it.
func (p RowPolicy) String() string {
	switch p {
	case Smallest:
		return "smallest"
	case Pad:
		return "pad"
	case Fallback:
		return "fallback"
	}
	return fmt.Sprintf("RowPolicy(%d)", int(p))
}

// ParseRowPolicy reads "fallback", "pad" or "smallest".
func ParseRowPolicy(s string) (RowPolicy, error) {
	for _, p := range []RowPolicy{Fallback, Pad, Smallest} {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown row policy %q (expected fallback, pad or smallest)", s)
}

// fallbacks is llama.cpp's fallback for each 256-block format strata has
// (v0.5.0, llama-quant.cpp's tensor_type_fallback); 32-block formats have
// none and fall back only to f16.
var fallbacks = map[string]string{
	"iq1_s":   "iq4_nl",
	"iq1_m":   "iq4_nl",
	"iq2_xxs": "iq4_nl",
	"iq2_xs":  "iq4_nl",
	"iq2_s":   "iq4_nl",
	"iq3_xxs": "iq4_nl",
	"iq3_s":   "iq4_nl",
	"iq4_xs":  "iq4_nl",
	"q2_k":    "q4_0",
	"q3_k":    "q4_0",
	"q4_k":    "q5_0",
	"q5_k":    "q5_1",
	"q6_k":    "q8_0",
}

// RowLayout says how rows of Len elements are stored: in Format, Stored
// (≥ Len, a multiple of Format.BlockElems) elements per row, the elements
// past Len being zero padding.
type RowLayout struct {
	Format *Format
	Len    int
	Stored int
}

// ForRow returns the layout of rows of rowLen elements planned in the format
// called name, under policy p. Rows that are whole blocks keep the format
// unpadded whatever the policy.
func ForRow(name string, rowLen int, p RowPolicy) (RowLayout, error) {
	f, err := Lookup(name)
	if err != nil {
		return RowLayout{}, err
	}
	if rowLen <= 0 {
		return RowLayout{}, fmt.Errorf("row length %d for format %s: must be positive", rowLen, f.Name)
	}
	if rowLen%f.BlockElems == 0 {
		return RowLayout{f, rowLen, rowLen}, nil
	}
	pad := RowLayout{f, rowLen, (rowLen + f.BlockElems - 1) / f.BlockElems * f.BlockElems}
	fb, fbErr := fallbackFor(f, rowLen)
	switch p {
	case Pad:
		return pad, nil
	case Fallback:
		return fb, fbErr
	case Smallest:
		if fbErr != nil || pad.RowBytes() < fb.RowBytes() {
			return pad, nil
		}
		return fb, nil
	}
	return RowLayout{}, fmt.Errorf("unknown row policy %d", int(p))
}

func fallbackFor(f *Format, rowLen int) (RowLayout, error) {
	fb := f
	if f.BlockElems > 32 {
		name, ok := fallbacks[f.Name]
		if !ok {
			return RowLayout{}, fmt.Errorf("format %s has no fallback for rows of %d (block size %d)", f.Name, rowLen, f.BlockElems)
		}
		fb = registry[name]
	}
	if rowLen%fb.BlockElems != 0 {
		fb = registry["f16"]
	}
	return RowLayout{fb, rowLen, rowLen}, nil
}

// RowBytes is the storage size of one row.
func (r RowLayout) RowBytes() int { return r.Format.Bytes(r.Stored) }

// Padded reports whether rows carry zero padding.
func (r RowLayout) Padded() bool { return r.Stored != r.Len }

// tailPool recycles the one-block scratch the padded tail of a row goes
// through, since Dot runs for every row of every expert on the hot path.
var tailPool = sync.Pool{New: func() any { return new([256]float32) }}

// EncodeRow quantizes one row of Len values into dst (RowBytes bytes),
// zero-padding it to Stored. Whole zero groups cost the quantizers nothing:
// their scales come out zero and leave the real groups' scales alone.
func (r RowLayout) EncodeRow(src []float32, dst []byte) {
	src = src[:r.Len]
	whole := r.Len / r.Format.BlockElems * r.Format.BlockElems
	r.Format.Encode(src[:whole], dst)
	if whole == r.Len {
		return
	}
	tail := make([]float32, r.Stored-whole)
	copy(tail, src[whole:])
	r.Format.Encode(tail, dst[r.Format.Bytes(whole):])
}

// DecodeRow dequantizes one stored row into dst[:Len], dropping the padding.
func (r RowLayout) DecodeRow(src []byte, dst []float32) {
	dst = dst[:r.Len]
	whole := r.Len / r.Format.BlockElems * r.Format.BlockElems
	r.Format.Decode(src, dst[:whole])
	if whole == r.Len {
		return
	}
	buf := tailPool.Get().(*[256]float32)
	tail := buf[:r.Format.BlockElems]
	r.Format.Decode(src[r.Format.Bytes(whole):], tail)
	copy(dst[whole:], tail)
	tailPool.Put(buf)
}

// Dot is Σ DecodeRow(row)[i]·x[i] over the row's Len values; the padding
// meets implicit zeros.
func (r RowLayout) Dot(row []byte, x []float32) float64 {
	x = x[:r.Len]
	whole := r.Len / r.Format.BlockElems * r.Format.BlockElems
	s := r.Format.Dot(row, x[:whole])
	if whole == r.Len {
		return s
	}
	buf := tailPool.Get().(*[256]float32)
	tail := buf[:r.Format.BlockElems]
	clear(tail[copy(tail, x[whole:]):])
	s += r.Format.Dot(row[r.Format.Bytes(whole):], tail)
	tailPool.Put(buf)
	return s
}
