// Package pack writes and reads the .experts file beside a GGUF model: every
// routed expert's gate, up and down data in one contiguous, 16 KiB-aligned
// entry, so streaming an expert from SSD is one read, with an index
// (layer, expert → offset, length, CRC-32C) and a header that ties the pack
// to its GGUF so a stale pack is refused.
//
// File layout (little-endian):
//
//	page 0    header: magic "STRXPACK", version, page size, the GGUF's size,
//	          SHA-256 of its header region, SHA-256 of sampled expert bytes,
//	          layer and expert counts, the index's offset, length and CRC,
//	          and the header's own CRC
//	page 1…   entries, layer-major, each starting on a page; inside an entry
//	          the parts (gate, up, down) start on 256-byte boundaries, the
//	          layout of one expert in the engine's experts buffer, so an
//	          entry can be read straight into an arena slot
//	index     per layer: its GGUF block, its parts (tensor, rows, offset and
//	          length in the entry); per entry: offset, length, CRC-32C
//
// The tie to the GGUF is cheap to check at every open and catches any
// re-conversion: the GGUF's size, a hash of everything before its tensor data
// (metadata, the embedded config, every tensor's name, type, shape and
// offset) and a hash of 4 KiB at the start, middle and end of every expert
// tensor. A re-conversion changes every weight, so the sampled bytes too. What
// it cannot see is an edit inside one expert of an existing file; Check
// compares every entry with the GGUF (strata pack --verify).
package pack

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

const (
	// Magic opens every pack.
	Magic = "STRXPACK"
	// Version is the layout this package writes and reads.
	Version = 1
	// PageSize aligns every entry (the streaming arena's page).
	PageSize = 16 << 10
	// PartAlign aligns gate, up and down inside an entry, as the engine's
	// experts buffer aligns them.
	PartAlign = 256
	// sampleBytes is the size of each sampled window of an expert tensor.
	sampleBytes = 4 << 10
	headerBytes = 120 // the used part of page 0
)

// ErrStale marks a pack that does not belong to the GGUF it was opened with.
var ErrStale = errors.New("stale expert pack")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Part is one piece of an expert: rows [Row, Row+Rows) of the expert's slice
// of a stacked GGUF tensor (ne [cols, rows, experts]).
type Part struct {
	Tensor    string
	Row, Rows int
}

// Layer lists the parts of every expert of one GGUF block, in entry order
// (gate, up, down).
type Layer struct {
	Block int
	Parts []Part
}

// PartInfo is a part with its place inside an entry.
type PartInfo struct {
	Part
	Offset, Length int
}

// Entry is one expert's place in the pack.
type Entry struct {
	Offset int64
	Length int
	CRC    uint32
}

// Path is the pack path of a GGUF file.
func Path(ggufPath string) string { return ggufPath + ".experts" }

// layout is the part table of one layer, validated against the GGUF.
type layout struct {
	block int
	parts []PartInfo
	size  int // entry length
}

// plan checks the layers against the GGUF's tensor infos and places the parts.
func plan(g *gguf.File, layers []Layer) ([]layout, int, error) {
	if len(layers) == 0 {
		return nil, 0, fmt.Errorf("gguf %s has no routed experts to pack", g.Path)
	}
	experts := -1
	seen := map[int]bool{}
	out := make([]layout, len(layers))
	for i, l := range layers {
		if seen[l.Block] {
			return nil, 0, fmt.Errorf("block %d listed twice", l.Block)
		}
		seen[l.Block] = true
		if len(l.Parts) == 0 {
			return nil, 0, fmt.Errorf("block %d has no expert parts", l.Block)
		}
		lo := layout{block: l.Block}
		off := 0
		for _, p := range l.Parts {
			ti, ok := tensorInfo(g, p.Tensor)
			if !ok {
				return nil, 0, fmt.Errorf("gguf %s has no tensor %s (block %d experts)", g.Path, p.Tensor, l.Block)
			}
			if len(ti.Dims) != 3 {
				return nil, 0, fmt.Errorf("gguf %s: tensor %s has dims %v, expected stacked [cols, rows, experts]", g.Path, p.Tensor, ti.Dims)
			}
			if experts < 0 {
				experts = int(ti.Dims[2])
			}
			if int(ti.Dims[2]) != experts {
				return nil, 0, fmt.Errorf("gguf %s: tensor %s has %d experts, others %d", g.Path, p.Tensor, ti.Dims[2], experts)
			}
			if p.Row < 0 || p.Rows <= 0 || p.Row+p.Rows > int(ti.Dims[1]) {
				return nil, 0, fmt.Errorf("gguf %s: tensor %s: rows [%d, %d) outside its %d rows", g.Path, p.Tensor, p.Row, p.Row+p.Rows, ti.Dims[1])
			}
			off = alignUp(off, PartAlign)
			n := p.Rows * int(ti.RowBytes())
			lo.parts = append(lo.parts, PartInfo{Part: p, Offset: off, Length: n})
			off += n
		}
		lo.size = off
		out[i] = lo
	}
	if experts <= 0 {
		return nil, 0, fmt.Errorf("gguf %s: expert tensors have no experts", g.Path)
	}
	return out, experts, nil
}

func tensorInfo(g *gguf.File, name string) (gguf.TensorInfo, bool) {
	for _, t := range g.Tensors {
		if t.Name == name {
			return t, true
		}
	}
	return gguf.TensorInfo{}, false
}

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// partBytes is part p of expert e, a view of the GGUF mapping.
func partBytes(g *gguf.File, p PartInfo, e int) ([]byte, error) {
	t, ok := g.Tensor(p.Tensor)
	if !ok {
		return nil, fmt.Errorf("gguf %s: tensor %s is gone (file closed?)", g.Path, p.Tensor)
	}
	slice := int64(t.Dims[1]) * t.RowBytes()
	start := int64(e)*slice + int64(p.Row)*t.RowBytes()
	return t.Data[start : start+int64(p.Length)], nil
}

// fingerprint is the tie between a pack and its GGUF: its size, the hash of
// its bytes before the tensor data, and the hash of sampled expert bytes.
type fingerprint struct {
	size         uint64
	meta, sample [32]byte
}

func fingerprintOf(g *gguf.File, layers []layout) (fingerprint, error) {
	var fp fingerprint
	f, err := os.Open(g.Path)
	if err != nil {
		return fp, fmt.Errorf("gguf: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fp, fmt.Errorf("gguf: %w", err)
	}
	fp.size = uint64(st.Size())
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, g.DataOffset)); err != nil {
		return fp, fmt.Errorf("gguf %s: reading its header: %w", g.Path, err)
	}
	h.Sum(fp.meta[:0])
	h.Reset()
	done := map[string]bool{}
	for _, l := range layers {
		for _, p := range l.parts {
			if done[p.Tensor] {
				continue
			}
			done[p.Tensor] = true
			t, ok := g.Tensor(p.Tensor)
			if !ok {
				return fp, fmt.Errorf("gguf %s has no tensor %s", g.Path, p.Tensor)
			}
			n := len(t.Data)
			for _, at := range []int{0, n/2 - sampleBytes/2, n - sampleBytes} {
				at = max(0, min(at, n-sampleBytes))
				h.Write(t.Data[at:min(n, at+sampleBytes)])
			}
		}
	}
	h.Sum(fp.sample[:0])
	return fp, nil
}

// Write packs the experts of layers (blocks of g) into path, atomically.
// progress, when set, is called after each entry with bytes written so far
// and the total.
func Write(path string, g *gguf.File, layers []Layer, progress func(done, total int64)) error {
	lays, experts, err := plan(g, layers)
	if err != nil {
		return fmt.Errorf("pack %s: %w", path, err)
	}
	fp, err := fingerprintOf(g, lays)
	if err != nil {
		return fmt.Errorf("pack %s: %w", path, err)
	}
	tmp, err := outfile.Create(path)
	if err != nil {
		return fmt.Errorf("pack: %w", err)
	}
	defer tmp.Abort() // after Commit: nothing to do
	fail := func(err error) error { return fmt.Errorf("pack %s: %w", path, err) }
	w := bufio.NewWriterSize(tmp, 4<<20)
	var total int64
	for _, l := range lays {
		total += int64(experts) * int64(alignUp(l.size, PageSize))
	}
	pos := int64(PageSize) // page 0 is the header, written last
	if _, err := w.Write(make([]byte, PageSize)); err != nil {
		return fail(err)
	}
	entries := make([]Entry, 0, len(lays)*experts)
	buf := make([]byte, 0, alignUp(slices.MaxFunc(lays, func(a, b layout) int { return a.size - b.size }).size, PageSize))
	for _, l := range lays {
		for e := 0; e < experts; e++ {
			buf = buf[:alignUp(l.size, PageSize)]
			clear(buf)
			for _, p := range l.parts {
				src, err := partBytes(g, p, e)
				if err != nil {
					return fail(err)
				}
				copy(buf[p.Offset:], src)
			}
			entries = append(entries, Entry{Offset: pos, Length: l.size, CRC: crc32.Checksum(buf[:l.size], castagnoli)})
			if _, err := w.Write(buf); err != nil {
				return fail(err)
			}
			pos += int64(len(buf))
			if progress != nil {
				progress(pos-PageSize, total)
			}
		}
	}
	index := encodeIndex(lays, entries)
	if _, err := w.Write(index); err != nil {
		return fail(err)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	hdr := header{fp: fp, layers: uint32(len(lays)), experts: uint32(experts), indexOff: uint64(pos), indexLen: uint64(len(index)), indexCRC: crc32.Checksum(index, castagnoli)}
	if _, err := tmp.WriteAt(hdr.encode(), 0); err != nil {
		return fail(err)
	}
	if err := tmp.Commit(); err != nil {
		return fail(err)
	}
	return nil
}

// header is page 0.
type header struct {
	fp                 fingerprint
	layers, experts    uint32
	indexOff, indexLen uint64
	indexCRC           uint32
}

func (h header) encode() []byte {
	b := make([]byte, headerBytes)
	le := binary.LittleEndian
	copy(b, Magic)
	le.PutUint32(b[8:], Version)
	le.PutUint32(b[12:], PageSize)
	le.PutUint64(b[16:], h.fp.size)
	copy(b[24:56], h.fp.meta[:])
	copy(b[56:88], h.fp.sample[:])
	le.PutUint32(b[88:], h.layers)
	le.PutUint32(b[92:], h.experts)
	le.PutUint64(b[96:], h.indexOff)
	le.PutUint64(b[104:], h.indexLen)
	le.PutUint32(b[112:], h.indexCRC)
	le.PutUint32(b[116:], crc32.Checksum(b[:116], castagnoli))
	return b
}

func decodeHeader(b []byte) (header, error) {
	var h header
	le := binary.LittleEndian
	if len(b) < headerBytes {
		return h, fmt.Errorf("%d bytes: too short for a pack header", len(b))
	}
	if string(b[:8]) != Magic {
		return h, fmt.Errorf("bad magic %q (want %q): not a strata expert pack", b[:8], Magic)
	}
	if v := le.Uint32(b[8:]); v != Version {
		return h, fmt.Errorf("pack version %d, this strata reads version %d: rebuild it with strata pack", v, Version)
	}
	if crc32.Checksum(b[:116], castagnoli) != le.Uint32(b[116:]) {
		return h, errors.New("header checksum mismatch: the pack is corrupt")
	}
	if p := le.Uint32(b[12:]); p != PageSize {
		return h, fmt.Errorf("page size %d, want %d", p, PageSize)
	}
	h.fp.size = le.Uint64(b[16:])
	copy(h.fp.meta[:], b[24:56])
	copy(h.fp.sample[:], b[56:88])
	h.layers, h.experts = le.Uint32(b[88:]), le.Uint32(b[92:])
	h.indexOff, h.indexLen, h.indexCRC = le.Uint64(b[96:]), le.Uint64(b[104:]), le.Uint32(b[112:])
	return h, nil
}

func encodeIndex(lays []layout, entries []Entry) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	put32 := func(v int) { b.Write(le.AppendUint32(nil, uint32(v))) }
	for _, l := range lays {
		put32(l.block)
		put32(len(l.parts))
		for _, p := range l.parts {
			b.Write(le.AppendUint16(nil, uint16(len(p.Tensor))))
			b.WriteString(p.Tensor)
			put32(p.Row)
			put32(p.Rows)
			put32(p.Offset)
			put32(p.Length)
		}
	}
	for _, e := range entries {
		b.Write(le.AppendUint64(nil, uint64(e.Offset)))
		put32(e.Length)
		b.Write(le.AppendUint32(nil, e.CRC))
	}
	return b.Bytes()
}

// indexReader decodes the index, failing on the first short read.
type indexReader struct {
	b   []byte
	err error
}

func (r *indexReader) take(n int) []byte {
	if r.err != nil || n > len(r.b) {
		r.err = errors.New("index truncated")
		return make([]byte, n)
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

func (r *indexReader) u32() int    { return int(binary.LittleEndian.Uint32(r.take(4))) }
func (r *indexReader) u64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }

func decodeIndex(b []byte, layers, experts int) ([]layout, []Entry, error) {
	r := &indexReader{b: b}
	lays := make([]layout, 0, min(layers, len(b)/8))
	for range layers {
		l := layout{block: r.u32()}
		n := r.u32()
		if r.err != nil || n > len(r.b)/18 {
			return nil, nil, errors.New("index truncated or corrupt (part count)")
		}
		for range n {
			name := string(r.take(int(binary.LittleEndian.Uint16(r.take(2)))))
			p := PartInfo{Part: Part{Tensor: name, Row: r.u32(), Rows: r.u32()}, Offset: r.u32(), Length: r.u32()}
			l.parts = append(l.parts, p)
			l.size = max(l.size, p.Offset+p.Length)
		}
		lays = append(lays, l)
	}
	if r.err != nil || len(r.b) != layers*experts*16 {
		return nil, nil, fmt.Errorf("index of %d bytes does not hold %d layers × %d experts", len(b), layers, experts)
	}
	entries := make([]Entry, layers*experts)
	for i := range entries {
		entries[i] = Entry{Offset: int64(r.u64()), Length: r.u32(), CRC: uint32(r.u32())}
	}
	return lays, entries, r.err
}
