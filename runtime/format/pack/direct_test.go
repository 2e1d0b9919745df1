package pack_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
)

// faulty wraps a descriptor with the faults pread(2) may show.
type faulty struct {
	f          pack.PReader
	mu         sync.Mutex
	calls      int
	maxBytes   int   // most bytes one call returns (0: all)
	firstBytes int   // most bytes the first call returns (0: maxBytes)
	eintrEvery int   // every k-th call fails with EINTR before reading (0: never)
	err        error // every call fails with this
	t          *testing.T
	aligned    bool // every call must be aligned (a direct descriptor)
}

func (f *faulty) ReadAt(b []byte, off int64) (int, error) {
	f.mu.Lock()
	f.calls++
	calls := f.calls
	f.mu.Unlock()
	if f.aligned && (uintptr(unsafe.Pointer(&b[0]))%pack.DirectAlign != 0 || off%pack.DirectAlign != 0 || len(b)%pack.DirectAlign != 0) {
		f.t.Errorf("unaligned direct read of %d bytes at %d into %p", len(b), off, &b[0])
	}
	if f.err != nil {
		return 0, &os.PathError{Op: "read", Path: "x", Err: f.err}
	}
	if f.eintrEvery > 0 && calls%f.eintrEvery == 0 {
		return 0, &os.PathError{Op: "read", Path: "x", Err: syscall.EINTR}
	}
	// Read all that was asked (a direct descriptor needs the aligned
	// length), then report fewer bytes, as a short pread would.
	n, err := f.f.ReadAt(b, off)
	limit := f.maxBytes
	if calls == 1 && f.firstBytes > 0 {
		limit = f.firstBytes
	}
	if limit > 0 && n > limit {
		n, err = limit, nil
		for i := n; i < len(b); i++ {
			b[i] = 0xee // a reader that stops here keeps garbage
		}
	}
	return n, err
}

// refuseDirect makes the packs the test opens from here on get no direct
// descriptor, as on a filesystem that refuses O_DIRECT at open.
func refuseDirect(t *testing.T) {
	old := *pack.OpenDirectFile
	t.Cleanup(func() { *pack.OpenDirectFile = old })
	*pack.OpenDirectFile = func(string) (*os.File, string, error) { return nil, "", syscall.EINVAL }
}

// openPack writes the test pack under dir and opens it.
func openPack(t *testing.T, dir string) (*pack.Reader, *gguf.File, []pack.Layer) {
	t.Helper()
	path, layers := testFile(t, dir, 1)
	g := writePack(t, path, layers)
	r, err := pack.Open(pack.Path(path), g)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r, g, layers
}

// entries reads every entry's whole pages into page-aligned memory, as the
// arena does.
func entries(t *testing.T, r *pack.Reader, layers []pack.Layer) [][]byte {
	t.Helper()
	var out [][]byte
	for _, l := range layers {
		for e := 0; e < experts; e++ {
			en, _ := r.Entry(l.Block, e)
			buf := backend.AlignedBytes(int64((en.Length+pack.PageSize-1)/pack.PageSize*pack.PageSize), pack.PageSize)
			if err := r.ReadExpert(l.Block, e, 0, buf); err != nil {
				t.Fatal(err)
			}
			out = append(out, buf)
		}
	}
	return out
}

// The direct and buffered paths read the same bytes, and those are the
// GGUF's (Check compares every entry with it).
func TestDirectMatchesBuffered(t *testing.T) {
	dir := t.TempDir()
	r, g, layers := openPack(t, dir)
	if !r.Direct() {
		t.Logf("%s: %s; the direct side runs on a stand-in over the buffered descriptor", dir, r.IOPath())
		pack.WrapDirect(r, func(f pack.PReader) pack.PReader { return f })
	}
	pack.WrapDirect(r, func(f pack.PReader) pack.PReader { return &faulty{f: f, t: t, aligned: true} })
	if err := r.Check(g, nil); err != nil {
		t.Fatal(err)
	}
	direct := entries(t, r, layers)
	if !r.Direct() || strings.Contains(r.IOPath(), "unaligned") {
		t.Errorf("after page-aligned reads, the path is %q: want every read direct", r.IOPath())
	}

	// The same pack with the filesystem refusing direct I/O at open.
	refuseDirect(t)
	b, err := pack.Open(r.Path(), g)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Direct() || !strings.HasPrefix(b.IOPath(), "buffered (") || !strings.Contains(b.IOPath(), "invalid argument") {
		t.Errorf("direct I/O refused at open: path %q", b.IOPath())
	}
	if err := b.Check(g, nil); err != nil {
		t.Fatal(err)
	}
	for i, want := range entries(t, b, layers) {
		if !bytes.Equal(direct[i], want) {
			t.Errorf("entry %d: the direct read differs from the buffered one", i)
		}
	}
}

// A filesystem that takes the open but refuses the read (EINVAL) turns
// direct reads off for good; the read itself still succeeds. Reads into
// unaligned memory go buffered and are counted.
func TestDirectFallback(t *testing.T) {
	r, g, layers := openPack(t, t.TempDir())
	want := entries(t, r, layers)
	refuse := &faulty{err: syscall.EINVAL}
	pack.WrapDirect(r, func(f pack.PReader) pack.PReader { refuse.f = f; return refuse })
	if !r.Direct() {
		t.Fatal("no direct path after installing one")
	}
	got := entries(t, r, layers)
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("entry %d differs after the fallback", i)
		}
	}
	if refuse.calls != 1 || r.Direct() || !strings.Contains(r.IOPath(), "refused a") {
		t.Errorf("%d direct reads, path %q: want one refused read, then buffered", refuse.calls, r.IOPath())
	}
	if err := r.Check(g, nil); err != nil {
		t.Fatal(err)
	}

	// Unaligned memory (only where the platform needs alignment).
	r2, _, _ := openPack(t, t.TempDir())
	strict := &faulty{t: t, aligned: true}
	pack.WrapDirect(r2, func(f pack.PReader) pack.PReader { strict.f = f; return strict })
	mem := backend.AlignedBytes(2*pack.PageSize, pack.PageSize)
	if err := r2.ReadExpert(layers[0].Block, 1, 0, mem[1:1+pack.PageSize]); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(mem[1:1+pack.PageSize], want[1]) {
		t.Error("an unaligned read got other bytes")
	}
	if pack.DirectAlign > 1 && (strict.calls != 0 || !strings.Contains(r2.IOPath(), "1 unaligned reads buffered")) {
		t.Errorf("%d direct reads, path %q: want the unaligned read buffered and counted", strict.calls, r2.IOPath())
	}
	if !r2.Direct() {
		t.Errorf("one unaligned read turned direct reads off: %q", r2.IOPath())
	}
}

// Short reads continue where they stopped and EINTR is retried, on both
// paths; what persists is an error naming the pack, block, expert and bytes.
func TestReadRetries(t *testing.T) {
	r, _, layers := openPack(t, t.TempDir())
	want := entries(t, r, layers)
	for _, direct := range []bool{true, false} {
		if !direct {
			refuseDirect(t)
		}
		r, _, _ := openPack(t, t.TempDir())
		buffered := &faulty{maxBytes: 3000, eintrEvery: 2}
		pack.WrapBuffered(r, func(f pack.PReader) pack.PReader { buffered.f = f; return buffered })
		var d *faulty
		if direct {
			// Short direct reads of whole blocks, and a first one that
			// leaves an unaligned remainder (for the buffered descriptor
			// where direct reads need alignment).
			d = &faulty{t: t, aligned: pack.DirectAlign > 1, maxBytes: 4096, firstBytes: 1000, eintrEvery: 3}
			pack.WrapDirect(r, func(f pack.PReader) pack.PReader { d.f = f; return d })
		}
		got := entries(t, r, layers)
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("direct %v: entry %d differs after short reads and EINTR", direct, i)
			}
		}
		if direct && (d.calls < (len(want)-1)*pack.PageSize/d.maxBytes || (buffered.calls == 0) != (pack.DirectAlign == 1)) {
			t.Errorf("%d direct and %d buffered calls for %d pages (%s)", d.calls, buffered.calls, len(want), r.IOPath())
		}
		if !direct && buffered.calls < len(want)*(pack.PageSize/3000) {
			t.Errorf("%d buffered calls for %d pages of 3000-byte reads", buffered.calls, len(want))
		}
	}

	buf := backend.AlignedBytes(pack.PageSize, pack.PageSize)
	for _, c := range []struct {
		name string
		f    *faulty
		is   error
		msg  string
	}{
		{"persistent EINTR", &faulty{eintrEvery: 1}, syscall.EINTR, "no progress after"},
		{"EIO", &faulty{err: syscall.EIO}, syscall.EIO, "input/output error"},
		{"EOF", &faulty{err: io.EOF}, io.ErrUnexpectedEOF, "truncated pack?"},
	} {
		r, _, _ := openPack(t, t.TempDir())
		pack.WrapBuffered(r, func(f pack.PReader) pack.PReader { c.f.f = f; return c.f })
		pack.WrapDirect(r, func(f pack.PReader) pack.PReader { return pack.PReader(c.f) })
		err := r.ReadExpert(3, 2, 0, buf)
		if !errors.Is(err, c.is) {
			t.Errorf("%s: %v, want %v", c.name, err, c.is)
			continue
		}
		for _, s := range []string{r.Path(), "block 3, expert 2", "bytes [0, 16384)", c.msg} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: %q does not say %q", c.name, err, s)
			}
		}
		if c.is != syscall.EINTR && c.f.calls != 1 {
			t.Errorf("%s: %d attempts, want 1 (the streamer retries real errors)", c.name, c.f.calls)
		}
	}
}
