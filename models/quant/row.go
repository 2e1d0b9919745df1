package quant

import (
	"fmt"
	"strings"
	"sync"
)

// Rows whose length is not a multiple of a format's block size (the 640-wide
// rows of Qwen3.8-Flash-Next's expert down projection under a 256-element
// format) cannot be stored in that format as they are. Two remedies:
//
//   - Pad: keep the format and zero-pad each row to whole blocks. The padding
//     decodes to values that multiply nothing (RowLayout.Dot and DecodeRow
//     stop at the real length), so nothing changes numerically; the cost is
//     the padding's bytes, and the stored tensor is wider than the model's,
//     which llama.cpp would not accept.
//   - Fallback: store the tensor in a format with 32-element blocks, the type
//     llama.cpp's quantizer falls back to (llama_tensor_get_type): the 2- and
//     3-bit types and IQ4_XS go to IQ4_NL, Q5_K to Q5_1, Q6_K to Q8_0; where
//     llama.cpp takes Q4_K to Q5_0 we take it to IQ4_NL (same 4.5 bits per
//     weight as Q4_K; chosen before strata had Q5_0, and kept so converted
//     files do not change). Rows that fit no 32-block go to f16, as in
//     llama.cpp. Files stay readable by llama.cpp.
//
// Smallest, the default, picks whichever stores the row in fewer bytes (the
// fallback on a tie, since it is also the more precise and compatible one).
// For the Flash-Next down projection under iq2_xs that is Pad: 222 bytes per
// row against 360 for IQ4_NL.

// RowPolicy chooses the remedy for rows that are not whole blocks.
type RowPolicy int

const (
	Smallest RowPolicy = iota // the default: fewer bytes of Pad and Fallback
	Pad                       // zero-pad rows to whole blocks; strata-only files
	Fallback                  // llama.cpp's fallback format; llama.cpp-compatible files
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

// ParseRowPolicy reads "smallest", "pad" or "fallback".
func ParseRowPolicy(s string) (RowPolicy, error) {
	for _, p := range []RowPolicy{Smallest, Pad, Fallback} {
		if strings.EqualFold(s, p.String()) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("unknown row policy %q (expected smallest, pad or fallback)", s)
}

// fallbacks is the 32-block format for each 256-block format.
var fallbacks = map[string]string{
	"q2_k":   "iq4_nl", // llama.cpp's too
	"q3_k":   "iq4_nl",
	"q5_k":   "q5_1",
	"iq2_xs": "iq4_nl",
	"iq4_xs": "iq4_nl",
	"q4_k":   "iq4_nl",
	"q6_k":   "q8_0",
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
	name, ok := fallbacks[f.Name]
	if !ok {
		return RowLayout{}, fmt.Errorf("format %s has no fallback for rows of %d (block size %d)", f.Name, rowLen, f.BlockElems)
	}
	fb := registry[name]
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
