package pack

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"

	"github.com/strata-llm/strata/runtime/format/gguf"
)

// Reader reads experts from a pack with positioned reads; it is safe for
// concurrent use (the streaming arena's reader threads can share one).
type Reader struct {
	path    string
	f       *os.File
	file    preader // f, through the page cache (tests inject faults here)
	direct  *direct // the page-cache-bypassing descriptor for expert reads
	experts int
	layers  []layout
	byBlock map[int]int // GGUF block → index into layers
	entries []Entry     // layer-major
}

// Open opens the pack at path and checks that it belongs to g: a pack made
// for another GGUF, or for an earlier conversion of this one, is refused with
// an error wrapping ErrStale that says how to rebuild it. Corrupt packs
// (header, index) are refused too.
func Open(path string, g *gguf.File) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("pack: %w", err)
	}
	r, err := open(path, f, g)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("pack %s: %w", path, err)
	}
	r.direct = newDirect(path)
	return r, nil
}

func open(path string, f *os.File, g *gguf.File) (*Reader, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	page := make([]byte, headerBytes)
	if _, err := f.ReadAt(page, 0); err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	h, err := decodeHeader(page)
	if err != nil {
		return nil, err
	}
	size := uint64(st.Size())
	if h.indexOff > size || h.indexLen > size-h.indexOff {
		return nil, fmt.Errorf("index [%d, %d) lies past the end of the %d-byte file: truncated", h.indexOff, h.indexOff+h.indexLen, size)
	}
	if h.layers == 0 || h.experts == 0 || uint64(h.layers)*uint64(h.experts)*16 > h.indexLen {
		return nil, fmt.Errorf("header claims %d layers × %d experts, more than its %d-byte index holds", h.layers, h.experts, h.indexLen)
	}
	index := make([]byte, h.indexLen)
	if _, err := f.ReadAt(index, int64(h.indexOff)); err != nil {
		return nil, fmt.Errorf("reading the index: %w", err)
	}
	if crc32.Checksum(index, castagnoli) != h.indexCRC {
		return nil, fmt.Errorf("index checksum mismatch: the pack is corrupt")
	}
	lays, entries, err := decodeIndex(index, int(h.layers), int(h.experts))
	if err != nil {
		return nil, err
	}
	r := &Reader{path: path, f: f, file: f, experts: int(h.experts), layers: lays, byBlock: map[int]int{}, entries: entries}
	for i, l := range lays {
		if _, dup := r.byBlock[l.block]; dup {
			return nil, fmt.Errorf("index lists block %d twice", l.block)
		}
		r.byBlock[l.block] = i
	}
	for i, e := range entries {
		l := lays[i/r.experts]
		if e.Offset%PageSize != 0 || e.Offset < PageSize || e.Length != l.size || uint64(e.Offset)+uint64(e.Length) > h.indexOff {
			return nil, fmt.Errorf("entry %d (block %d, expert %d) at [%d, +%d) is misplaced: corrupt index", i, l.block, i%r.experts, e.Offset, e.Length)
		}
	}
	// The tie to the GGUF: same parts, same tensor shapes, same bytes.
	stale := func(why string, args ...any) error {
		return fmt.Errorf("%w: it was made for another GGUF than %s (%s); rebuild it with `strata pack %s`", ErrStale, g.Path, fmt.Sprintf(why, args...), g.Path)
	}
	want, n, err := plan(g, layersOf(lays))
	if err != nil {
		return nil, stale("%v", err)
	}
	if n != r.experts {
		return nil, stale("%d experts per layer, the GGUF has %d", r.experts, n)
	}
	for i := range want {
		if want[i].block != lays[i].block || want[i].size != lays[i].size || !slices.Equal(want[i].parts, lays[i].parts) {
			return nil, stale("block %d's expert layout differs", lays[i].block)
		}
	}
	fp, err := fingerprintOf(g, lays)
	if err != nil {
		return nil, err
	}
	switch {
	case fp.size != h.fp.size:
		return nil, stale("GGUF size %d, the pack's is %d", fp.size, h.fp.size)
	case fp.meta != h.fp.meta:
		return nil, stale("its metadata or tensor table changed")
	case fp.sample != h.fp.sample:
		return nil, stale("its expert weights changed")
	}
	return r, nil
}

func layersOf(lays []layout) []Layer {
	out := make([]Layer, len(lays))
	for i, l := range lays {
		out[i].Block = l.block
		for _, p := range l.parts {
			out[i].Parts = append(out[i].Parts, p.Part)
		}
	}
	return out
}

// Path is the pack's file name.
func (r *Reader) Path() string { return r.path }

// Experts is the number of experts per layer.
func (r *Reader) Experts() int { return r.experts }

// Blocks lists the GGUF blocks the pack holds experts of, in file order.
func (r *Reader) Blocks() []int {
	out := make([]int, len(r.layers))
	for i, l := range r.layers {
		out[i] = l.block
	}
	return out
}

// Parts lists the parts of every expert of a block, with their place in an
// entry.
func (r *Reader) Parts(block int) ([]PartInfo, bool) {
	i, ok := r.byBlock[block]
	if !ok {
		return nil, false
	}
	return append([]PartInfo(nil), r.layers[i].parts...), true
}

// SlotBytes is the largest entry rounded up to pages: an arena slot that
// holds any expert of the pack.
func (r *Reader) SlotBytes() int {
	n := 0
	for _, l := range r.layers {
		n = max(n, alignUp(l.size, PageSize))
	}
	return n
}

// Entry returns where expert (block, expert) lies.
func (r *Reader) Entry(block, expert int) (Entry, error) {
	i, ok := r.byBlock[block]
	if !ok || expert < 0 || expert >= r.experts {
		return Entry{}, fmt.Errorf("pack %s has no expert %d of block %d (%d blocks × %d experts)", r.path, expert, block, len(r.layers), r.experts)
	}
	return r.entries[i*r.experts+expert], nil
}

// ReadExpert fills dst with bytes [off, off+len(dst)) of expert (block,
// expert)'s entry (the stream package's Reader): one positioned read,
// bypassing the page cache when dst, off and the length are aligned (arena
// slots and whole pages are; see IOPath), continued after short reads and
// EINTR. Bytes past the entry's last page read as zeros.
func (r *Reader) ReadExpert(block, expert, off int, dst []byte) error {
	e, err := r.Entry(block, expert)
	if err != nil {
		return err
	}
	if off < 0 {
		return fmt.Errorf("pack %s: bytes [%d, %d) outside expert %d of block %d (%d bytes)", r.path, off, off+len(dst), expert, block, e.Length)
	}
	// An arena slot is the largest block's entry; a block whose experts are
	// smaller (a file with per-layer formats) reads zeros past its own.
	n := max(0, min(len(dst), int(alignUp(e.Length, PageSize))-off))
	clear(dst[n:])
	if n == 0 {
		return nil
	}
	dst = dst[:n]
	if err := r.readAt(dst, e.Offset+int64(off)); err != nil {
		hint := ""
		if errors.Is(err, io.ErrUnexpectedEOF) {
			hint = " (truncated pack?)"
		}
		return fmt.Errorf("pack %s: block %d, expert %d, bytes [%d, %d) of its entry (file offset %d): %w%s",
			r.path, block, expert, off, off+len(dst), e.Offset+int64(off), err, hint)
	}
	return nil
}

// Verify checks a whole entry's bytes (at least its Length) against the
// CRC-32C in the index.
func (r *Reader) Verify(block, expert int, data []byte) error {
	e, err := r.Entry(block, expert)
	if err != nil {
		return err
	}
	if len(data) < e.Length || crc32.Checksum(data[:e.Length], castagnoli) != e.CRC {
		return fmt.Errorf("pack %s: expert %d of block %d fails its checksum: the pack is corrupt; rebuild it with strata pack", r.path, expert, block)
	}
	return nil
}

// Check reads every entry, verifies its checksum and compares it with the
// GGUF's bytes: the full check behind `strata pack --verify`. progress, when
// set, gets the bytes checked so far and the total.
func (r *Reader) Check(g *gguf.File, progress func(done, total int64)) error {
	var total, done int64
	for _, e := range r.entries {
		total += int64(e.Length)
	}
	buf := alignedBuf(r.SlotBytes()) // whole pages into a page: the arena's read path
	for i, e := range r.entries {
		l, x := r.layers[i/r.experts], i%r.experts
		if err := r.ReadExpert(l.block, x, 0, buf[:alignUp(e.Length, PageSize)]); err != nil {
			return err
		}
		if err := r.Verify(l.block, x, buf); err != nil {
			return err
		}
		for _, p := range l.parts {
			want, err := partBytes(g, p, x)
			if err != nil {
				return err
			}
			if !bytes.Equal(buf[p.Offset:p.Offset+p.Length], want) {
				return fmt.Errorf("%w: pack %s: expert %d of block %d (%s) differs from %s; rebuild it with `strata pack %s`", ErrStale, r.path, x, l.block, p.Tensor, g.Path, g.Path)
			}
		}
		done += int64(e.Length)
		if progress != nil {
			progress(done, total)
		}
	}
	return nil
}

// Close closes the pack file.
func (r *Reader) Close() error {
	err := r.f.Close()
	if r.direct.close != nil {
		err = errors.Join(err, r.direct.close())
	}
	if err != nil {
		return fmt.Errorf("pack %s: %w", r.path, err)
	}
	return nil
}
