package pack

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// preader is one positioned read as pread(2) does it: it may return fewer
// bytes than asked, or fail with EINTR. *os.File is one; tests inject
// faults through it.
type preader interface {
	ReadAt(b []byte, off int64) (int, error)
}

// maxStalls bounds consecutive reads that make no progress (EINTR, or an
// empty read that is not EOF) before a read is given up: a signal storm or a
// stuck device becomes an error instead of a hang.
const maxStalls = 64

var errNoProgress = errors.New("read returned no bytes")

// readFull fills b from f at off: short reads continue where they stopped
// and EINTR is retried, so the page range is complete or there is a real
// error (the streamer retries those).
func readFull(f preader, b []byte, off int64) error {
	stalls := 0
	for len(b) > 0 {
		n, err := f.ReadAt(b, off)
		b, off = b[n:], off+int64(n)
		switch {
		case len(b) == 0:
			return nil
		case err == nil || errors.Is(err, syscall.EINTR):
			if n > 0 {
				stalls = 0
				continue
			}
			if stalls++; stalls >= maxStalls {
				if err == nil {
					err = errNoProgress
				}
				return fmt.Errorf("no progress after %d attempts: %w", stalls, err)
			}
		case errors.Is(err, io.EOF):
			return io.ErrUnexpectedEOF
		default:
			return err
		}
	}
	return nil
}

// direct is the page-cache-bypassing side of a Reader: a second descriptor
// of the pack opened with O_DIRECT (Linux) or F_NOCACHE (darwin). Experts are
// read once into the arena and evicted by it, so caching them would only
// push the rest of the system out of memory and hide the device's real speed.
type direct struct {
	f     preader // nil: buffered only
	close func() error
	mode  string // "O_DIRECT", "F_NOCACHE"
	note  string // what the mode means on this filesystem, if worth saying

	off       atomic.Bool  // the filesystem refused a direct read: buffered from then on
	unaligned atomic.Int64 // reads that went buffered because dst or the range was not aligned
	mu        sync.Mutex
	why       string // why reads are buffered
}

// openDirectFile opens path bypassing the page cache; it is a variable so
// tests can make a filesystem refuse it.
var openDirectFile = openDirect

func newDirect(path string) *direct {
	f, mode, err := openDirectFile(path)
	if err != nil {
		return &direct{why: fmt.Sprintf("no direct I/O: %v", err)}
	}
	return &direct{f: f, close: f.Close, mode: mode, note: fsNote(path)}
}

// aligned reports whether a read of b at off may go direct.
func aligned(b []byte, off int64) bool {
	if directAlign <= 1 {
		return true
	}
	a := uintptr(directAlign - 1)
	return uintptr(unsafe.Pointer(unsafe.SliceData(b)))&a == 0 && uintptr(off)&a == 0 && uintptr(len(b))&a == 0
}

// active is the direct descriptor, or nil when reads are buffered.
func (d *direct) active() preader {
	if d.f == nil || d.off.Load() {
		return nil
	}
	return d.f
}

// refuse switches to buffered reads for good.
func (d *direct) refuse(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.off.Load() {
		d.why = fmt.Sprintf("the filesystem refused a %s read: %v", d.mode, err)
		d.off.Store(true)
	}
}

func (d *direct) String() string {
	if d.active() == nil {
		d.mu.Lock()
		defer d.mu.Unlock()
		return "buffered (" + d.why + ")"
	}
	s := d.mode
	if d.note != "" {
		s += " (" + d.note + ")"
	}
	if n := d.unaligned.Load(); n > 0 {
		s += fmt.Sprintf("; %d unaligned reads buffered", n)
	}
	return s
}

// mixed reads aligned ranges through the direct descriptor and the rest
// through the buffered one, so a short direct read that leaves an unaligned
// remainder still completes.
type mixed struct{ direct, buffered preader }

func (m mixed) ReadAt(b []byte, off int64) (int, error) {
	if aligned(b, off) {
		return m.direct.ReadAt(b, off)
	}
	return m.buffered.ReadAt(b, off)
}

// readAt fills dst from the pack at off: directly when that is on and the
// read is aligned, else through the page cache. A direct read the
// filesystem refuses (EINVAL) turns direct reads off and is read again
// buffered.
func (r *Reader) readAt(dst []byte, off int64) error {
	if d := r.direct.active(); d != nil {
		if aligned(dst, off) {
			err := readFull(mixed{d, r.file}, dst, off)
			if !errors.Is(err, syscall.EINVAL) {
				return err
			}
			r.direct.refuse(err)
		} else {
			r.direct.unaligned.Add(1)
		}
	}
	return readFull(r.file, dst, off)
}

// IOPath says how expert reads reach the disk: "O_DIRECT" or "F_NOCACHE"
// (the page cache bypassed; a note follows when the filesystem makes that
// moot, and a count of unaligned reads that went buffered), or
// "buffered (why)".
func (r *Reader) IOPath() string { return r.direct.String() }

// Direct reports whether aligned expert reads bypass the page cache.
func (r *Reader) Direct() bool { return r.direct.active() != nil }

// alignedBuf returns n zeroed bytes starting on a page, so reads into it can
// go direct.
func alignedBuf(n int) []byte {
	b := make([]byte, n+PageSize)
	skip := int(-uintptr(unsafe.Pointer(unsafe.SliceData(b))) & (PageSize - 1))
	return b[skip : skip+n : skip+n]
}
