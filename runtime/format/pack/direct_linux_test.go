package pack_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/strata-llm/strata/runtime/format/pack"
)

// directSupported probes whether dir's filesystem takes O_DIRECT reads.
func directSupported(t *testing.T, dir string) error {
	p := filepath.Join(dir, "probe")
	if err := os.WriteFile(p, make([]byte, 8192), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(p)
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_DIRECT, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 2*4096)
	off := 4096 - int(uintptr(unsafe.Pointer(unsafe.SliceData(buf)))%4096)
	_, err = f.ReadAt(buf[off:off+4096], 4096)
	return err
}

// Where the filesystem takes O_DIRECT, expert reads use it: the reader's
// second descriptor carries the flag (the kernel's own view, in fdinfo).
func TestDirectPathActive(t *testing.T) {
	dir := t.TempDir()
	if err := directSupported(t, dir); err != nil {
		t.Skipf("%s does not take O_DIRECT (%v): set TMPDIR to a disk-backed directory to test the direct path", dir, err)
	}
	r, g, _ := openPack(t, dir)
	if !r.Direct() || !strings.HasPrefix(r.IOPath(), "O_DIRECT") {
		t.Fatalf("%s takes O_DIRECT, but the reader's path is %q", dir, r.IOPath())
	}
	f, ok := pack.DirectFile(r).(*os.File)
	if !ok {
		t.Fatalf("direct descriptor is a %T", pack.DirectFile(r))
	}
	info, err := os.ReadFile(fmt.Sprintf("/proc/self/fdinfo/%d", f.Fd()))
	if err != nil {
		t.Skipf("no fdinfo to check the flag: %v", err)
	}
	var flags int64 = -1
	for _, line := range strings.Split(string(info), "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			flags, _ = strconv.ParseInt(strings.TrimSpace(v), 8, 64)
		}
	}
	if flags < 0 || flags&syscall.O_DIRECT == 0 {
		t.Errorf("direct descriptor's flags %o lack O_DIRECT (%o)", flags, syscall.O_DIRECT)
	}
	if err := r.Check(g, nil); err != nil {
		t.Fatal(err)
	}
	if !r.Direct() || strings.Contains(r.IOPath(), "unaligned") {
		t.Errorf("after Check the path is %q: want every read direct", r.IOPath())
	}
	t.Logf("%s: %s", dir, r.IOPath())
}
