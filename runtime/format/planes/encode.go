package planes

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
)

// EncodeOptions name a delta base: Base (the base file's bytes) and BaseName
// (its path relative to the encoded file's folder, as the decoder will look
// it up). Without a base no span is a delta.
type EncodeOptions struct {
	Base     []byte
	BaseName string
}

// Encode encodes data, checks that the result decodes to data, and returns
// it. A safetensors file is cut into spans by its tensors' dtypes; anything
// else is one span of bytes.
func Encode(data []byte, opt EncodeOptions) ([]byte, error) {
	sum := sha256.Sum256(data)
	h := Header{Size: int64(len(data)), SHA256: hex.EncodeToString(sum[:])}
	var baseTensors map[string]tensorRange
	if opt.Base != nil {
		bsum := sha256.Sum256(opt.Base)
		h.Base, h.BaseSHA256 = opt.BaseName, hex.EncodeToString(bsum[:])
		baseTensors, _ = safetensorsLayout(opt.Base)
	}
	spans := cut(data, baseTensors)

	type coded struct {
		planes [][]byte
		span   Span
	}
	out := make([]coded, len(spans))
	var wg sync.WaitGroup
	for i, s := range spans {
		wg.Go(func() { out[i].span, out[i].planes = encodeSpan(s, data[s.off:s.off+s.Len], opt.Base) })
	}
	wg.Wait()
	var body bytes.Buffer
	for _, c := range out {
		h.Spans = append(h.Spans, c.span)
		for _, p := range c.planes {
			body.Write(p)
		}
	}
	js, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	enc := append([]byte(magic), binary.AppendUvarint(nil, uint64(len(js)))...)
	enc = append(append(enc, js...), body.Bytes()...)

	back, err := Decode(enc, func(string) ([]byte, error) { return opt.Base, nil })
	if err != nil {
		return nil, fmt.Errorf("planes: the encoding does not decode: %w", err)
	}
	if !bytes.Equal(back, data) {
		return nil, fmt.Errorf("planes: the encoding decodes to other bytes")
	}
	return enc, nil
}

// span is a span to encode: Span plus where it starts.
type span struct {
	Span
	off int64
}

type tensorRange struct {
	dtype      string
	begin, end int64 // absolute offsets in the file
}

// safetensorsLayout returns a safetensors file's tensors by name, and the
// end of its header, or nil when data is not one.
func safetensorsLayout(data []byte) (map[string]tensorRange, int64) {
	if len(data) < 8 {
		return nil, 0
	}
	n := binary.LittleEndian.Uint64(data)
	if n > maxHeader || n > uint64(len(data)-8) {
		return nil, 0
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(data[8:8+n], &raw) != nil {
		return nil, 0
	}
	start := 8 + int64(n)
	out := map[string]tensorRange{}
	for name, msg := range raw {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			DType       string  `json:"dtype"`
			DataOffsets []int64 `json:"data_offsets"`
		}
		if json.Unmarshal(msg, &e) != nil || len(e.DataOffsets) != 2 || e.DataOffsets[0] < 0 || e.DataOffsets[1] < e.DataOffsets[0] ||
			e.DataOffsets[1] > int64(len(data))-start {
			return nil, 0
		}
		out[name] = tensorRange{e.DType, start + e.DataOffsets[0], start + e.DataOffsets[1]}
	}
	return out, start
}

var floatWidth = map[string]int{"BF16": 2, "F16": 2, "F32": 4, "F64": 8}
var intWidth = map[string]int{"I64": 8, "I32": 4, "I16": 2}

// cut splits data into spans: a safetensors file's header, then its tensors
// (gaps as bytes); runs of one coding are merged.
func cut(data []byte, base map[string]tensorRange) []span {
	tensors, start := safetensorsLayout(data)
	if tensors == nil {
		return []span{{Span: Span{Len: int64(len(data)), Width: 1}}}
	}
	type tr struct {
		name string
		tensorRange
	}
	var list []tr
	for n, t := range tensors {
		list = append(list, tr{n, t})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].begin < list[j].begin })
	var out []span
	add := func(s span) {
		if s.Len == 0 {
			return
		}
		if k := len(out) - 1; k >= 0 {
			p := &out[k]
			if p.Width == s.Width && p.Transform == s.Transform && p.off+p.Len == s.off &&
				(s.Transform != Delta || p.BaseOff+p.Len == s.BaseOff) {
				p.Len += s.Len
				return
			}
		}
		out = append(out, s)
	}
	at := int64(0)
	add(span{Span: Span{Len: start, Width: 1}})
	at = start
	for _, t := range list {
		if t.begin < at { // overlapping tensors: leave the rest as bytes
			break
		}
		add(span{Span: Span{Len: t.begin - at, Width: 1}, off: at})
		s := span{Span: Span{Len: t.end - t.begin, Width: 1}, off: t.begin}
		if w, ok := floatWidth[t.dtype]; ok && s.Len%int64(w) == 0 {
			s.Width, s.Transform = w, Rot1
			if b, ok := base[t.name]; ok && t.dtype == "BF16" && b.dtype == "BF16" && b.end-b.begin == s.Len {
				s.Transform, s.BaseOff = Delta, b.begin
			}
		} else if w, ok := intWidth[t.dtype]; ok && s.Len%int64(w) == 0 {
			s.Width = w
		}
		add(s)
		at = t.end
	}
	add(span{Span: Span{Len: int64(len(data)) - at, Width: 1}, off: at})
	return split(out)
}

// chunk bounds a span, so that decoding runs on every core.
const chunk = 1 << 20

func split(in []span) []span {
	var out []span
	for _, s := range in {
		for s.Len > chunk {
			n := chunk - chunk%int64(s.Width)
			head := s
			head.Len = n
			out = append(out, head)
			s.off += n
			s.Len -= n
			if s.Transform == Delta {
				s.BaseOff += n
			}
		}
		out = append(out, s)
	}
	return out
}

// encodeSpan splits a span into planes and codes each the smaller way.
func encodeSpan(s span, src, base []byte) (Span, [][]byte) {
	w := s.Width
	words := append([]byte(nil), src...)
	switch s.Transform {
	case Rot1:
		rotate(words, w, 1)
	case Delta:
		b := base[s.BaseOff : s.BaseOff+s.Len]
		for i := 0; i < len(words); i += 2 {
			d := ord(binary.LittleEndian.Uint16(words[i:])) - ord(binary.LittleEndian.Uint16(b[i:]))
			binary.LittleEndian.PutUint16(words[i:], zigzag(d))
		}
	}
	n := len(words) / w
	out := s.Span
	out.Planes, out.Deflated = make([]int64, w), make([]bool, w)
	planes := make([][]byte, w)
	for k := range w {
		p := make([]byte, n)
		for i := range p {
			p[i] = words[i*w+k]
		}
		best := p
		for _, level := range []int{flate.HuffmanOnly, flate.BestCompression} {
			if c := deflate(p, level); len(c) < len(best) {
				best, out.Deflated[k] = c, true
			}
		}
		planes[k], out.Planes[k] = best, int64(len(best))
	}
	return out, planes
}

func deflate(p []byte, level int) []byte {
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, level)
	w.Write(p)
	w.Close()
	return b.Bytes()
}
