// Package planes is the lossless codec of the checkpoints and references
// vendored in the tree (models/tiny-go, models/tiny-go-chat, the oracles in
// testdata/): FILE.planes stands for FILE, and every reader of FILE goes
// through ReadFile / ReadOSFile, which decode it when FILE itself is absent.
//
// Floating-point data barely compresses as a byte stream, but its bytes
// differ: in a bf16 or f32 weight the exponent byte holds 2–3 bits of
// entropy, the low mantissa bytes nearly 8. So the file is cut into spans of
// one element width (a safetensors file: its header, then one span per run of
// tensors of one dtype), each span's elements are split into byte planes
// (plane k holds byte k of every element), and each plane is stored as it is
// or deflated (compress/flate), whichever is smaller. Before the split a
// float span's words are rotated left by one bit, so the sign joins the
// mantissa and the high plane holds the whole exponent. A bf16 span may
// instead be a delta against a base file (a fine-tune against the model it
// was tuned from): each word, read as an ordered integer (sign-magnitude to
// two's complement), minus the base's word at the same offset, zigzag coded.
//
// The layout (little-endian):
//
//	"STRATAPL"           magic, 8 bytes
//	uvarint n, n bytes   the JSON header (Header)
//	the planes           in span order, plane 0 (the lowest byte) first
//
// The decoded bytes are checked against the header's SHA-256.
package planes

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync"
)

// Ext is the suffix of an encoded file: FILE.planes decodes to FILE.
const Ext = ".planes"

const magic = "STRATAPL"

// maxHeader bounds the JSON header (a few KB in practice).
const maxHeader = 16 << 20

// Header describes an encoded file.
type Header struct {
	Size   int64  `json:"size"`   // decoded bytes
	SHA256 string `json:"sha256"` // of the decoded bytes, hex
	// Base, when set, is the file the delta spans are against, relative to
	// the encoded file's folder (slash-separated), and BaseSHA256 its hash.
	Base       string `json:"base,omitempty"`
	BaseSHA256 string `json:"base_sha256,omitempty"`
	Spans      []Span `json:"spans"`
}

// Transforms of a span's words before the plane split.
const (
	None  = ""      // the bytes as they are
	Rot1  = "rot1"  // each word rotated left by one bit (floats: sign to the bottom)
	Delta = "delta" // bf16 only: zigzag(ord(word) - ord(base word)), against the base at BaseOff
)

// Span is a run of elements of one width, coded alike.
type Span struct {
	Len       int64  `json:"len"`   // bytes, a multiple of Width
	Width     int    `json:"width"` // 1, 2, 4 or 8
	Transform string `json:"transform,omitempty"`
	BaseOff   int64  `json:"base_off,omitempty"` // Delta: where the span's base words begin in the base file
	// Planes are the coded lengths of the Width planes, and Deflated says
	// which are deflated (the others are stored).
	Planes   []int64 `json:"planes"`
	Deflated []bool  `json:"deflated"`
}

// ParseHeader reads an encoded file's header and returns it with the offset
// of its first plane.
func ParseHeader(data []byte) (*Header, int, error) {
	if len(data) < len(magic) || string(data[:len(magic)]) != magic {
		return nil, 0, errors.New("not a planes file (no STRATAPL magic)")
	}
	n, k := binary.Uvarint(data[len(magic):])
	if k <= 0 || n > maxHeader || n > uint64(len(data)-len(magic)-k) {
		return nil, 0, errors.New("planes: bad or truncated header length")
	}
	start := len(magic) + k
	var h Header
	if err := json.Unmarshal(data[start:start+int(n)], &h); err != nil {
		return nil, 0, fmt.Errorf("planes: bad header: %w", err)
	}
	return &h, start + int(n), nil
}

// Decode decodes an encoded file. base returns the base file's bytes (the
// header's Base, as named there); it is called only for a file with delta
// spans, and may be nil otherwise.
func Decode(data []byte, base func(name string) ([]byte, error)) ([]byte, error) {
	h, off, err := ParseHeader(data)
	if err != nil {
		return nil, err
	}
	var baseData []byte
	if h.Base != "" {
		if base == nil {
			return nil, fmt.Errorf("planes: a delta against %s, and no base to read it from", h.Base)
		}
		if baseData, err = base(h.Base); err != nil {
			return nil, fmt.Errorf("planes: the delta's base: %w", err)
		}
	}
	if h.Size < 0 || h.Size > 1<<40 {
		return nil, fmt.Errorf("planes: bad size %d", h.Size)
	}
	out := make([]byte, h.Size)
	// Check the layout before any work, then decode the spans in parallel:
	// start-up of the default model waits on this.
	type job struct {
		s         Span
		src       []byte // its planes
		dst, base []byte
	}
	var jobs []job
	var at int64
	for i, s := range h.Spans {
		if err := s.check(); err != nil {
			return nil, fmt.Errorf("planes: span %d: %w", i, err)
		}
		if s.Len > h.Size-at {
			return nil, fmt.Errorf("planes: span %d runs past the decoded size %d", i, h.Size)
		}
		var coded int64
		for _, n := range s.Planes {
			coded += n
		}
		if coded > int64(len(data)-off) {
			return nil, fmt.Errorf("planes: span %d: truncated file", i)
		}
		j := job{s: s, src: data[off : off+int(coded)], dst: out[at : at+s.Len]}
		if s.Transform == Delta {
			if baseData == nil || s.BaseOff < 0 || s.BaseOff > int64(len(baseData)) || s.Len > int64(len(baseData))-s.BaseOff {
				return nil, fmt.Errorf("planes: span %d: its base range is outside the base file", i)
			}
			j.base = baseData[s.BaseOff : s.BaseOff+s.Len]
		}
		jobs = append(jobs, j)
		off += int(coded)
		at += s.Len
	}
	if at != h.Size {
		return nil, fmt.Errorf("planes: spans cover %d of %d bytes", at, h.Size)
	}
	if off != len(data) {
		return nil, fmt.Errorf("planes: %d bytes after the last plane", len(data)-off)
	}
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Go(func() { errs[i] = decodeSpan(j.s, j.src, j.dst, j.base) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("planes: span %d: %w", i, err)
		}
	}
	sum := sha256.Sum256(out)
	if hex.EncodeToString(sum[:]) != h.SHA256 {
		return nil, fmt.Errorf("planes: decoded bytes hash to %x, the header says %s", sum, h.SHA256)
	}
	return out, nil
}

func (s Span) check() error {
	switch s.Width {
	case 1, 2, 4, 8:
	default:
		return fmt.Errorf("width %d (want 1, 2, 4 or 8)", s.Width)
	}
	if s.Len < 0 || s.Len%int64(s.Width) != 0 {
		return fmt.Errorf("length %d is not a multiple of the width %d", s.Len, s.Width)
	}
	if len(s.Planes) != s.Width || len(s.Deflated) != s.Width {
		return fmt.Errorf("%d plane lengths and %d deflate flags for width %d", len(s.Planes), len(s.Deflated), s.Width)
	}
	for _, n := range s.Planes {
		if n < 0 {
			return fmt.Errorf("negative plane length %d", n)
		}
	}
	switch s.Transform {
	case None, Rot1:
	case Delta:
		if s.Width != 2 {
			return fmt.Errorf("delta on width %d (bf16 only)", s.Width)
		}
	default:
		return fmt.Errorf("unknown transform %q", s.Transform)
	}
	return nil
}

func decodeSpan(s Span, src, dst, base []byte) error {
	w := s.Width
	n := len(dst) / w
	plane := make([]byte, n)
	for k := range w {
		c := src[:s.Planes[k]]
		src = src[s.Planes[k]:]
		if s.Deflated[k] {
			r := flate.NewReader(bytes.NewReader(c))
			if _, err := io.ReadFull(r, plane); err != nil {
				return fmt.Errorf("plane %d: %w", k, err)
			}
			if extra, _ := r.Read(make([]byte, 1)); extra != 0 {
				return fmt.Errorf("plane %d: inflates to more than %d bytes", k, n)
			}
		} else {
			if len(c) != n {
				return fmt.Errorf("plane %d: %d stored bytes, want %d", k, len(c), n)
			}
			copy(plane, c)
		}
		for i, b := range plane {
			dst[i*w+k] = b
		}
	}
	switch s.Transform {
	case Rot1:
		rotate(dst, w, -1)
	case Delta:
		for i := 0; i < len(dst); i += 2 {
			d := binary.LittleEndian.Uint16(dst[i:])
			b := ord(binary.LittleEndian.Uint16(base[i:]))
			binary.LittleEndian.PutUint16(dst[i:], unord(b+unzigzag(d)))
		}
	}
	return nil
}

// rotate rotates each little-endian w-byte word of b left by k bits (k may
// be negative).
func rotate(b []byte, w, k int) {
	switch w {
	case 2:
		for i := 0; i < len(b); i += 2 {
			binary.LittleEndian.PutUint16(b[i:], bits.RotateLeft16(binary.LittleEndian.Uint16(b[i:]), k))
		}
	case 4:
		for i := 0; i < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], bits.RotateLeft32(binary.LittleEndian.Uint32(b[i:]), k))
		}
	case 8:
		for i := 0; i < len(b); i += 8 {
			binary.LittleEndian.PutUint64(b[i:], bits.RotateLeft64(binary.LittleEndian.Uint64(b[i:]), k))
		}
	}
}

// ord maps a bf16 bit pattern (sign-magnitude) to a two's complement
// integer that grows with the value (+0 → 0, -0 → -1), a bijection, so a
// small change across zero is a small difference.
func ord(u uint16) uint16 {
	if u&0x8000 != 0 {
		return ^u | 0x8000
	}
	return u
}

// unord inverts ord.
func unord(v uint16) uint16 {
	if v&0x8000 != 0 {
		return ^v | 0x8000
	}
	return v
}

func zigzag(v uint16) uint16   { return (v << 1) ^ uint16(int16(v)>>15) }
func unzigzag(z uint16) uint16 { return (z >> 1) ^ -(z & 1) }
