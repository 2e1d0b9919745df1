package cuda

import (
	"os"
	"path/filepath"
	"testing"
)

// The key changes with every input a CUBIN depends on, and with nothing
// else: header order is not an input.
func TestCubinKey(t *testing.T) {
	unit := []byte("kernel source")
	headers := map[string][]byte{"kernels.metal": []byte("decls"), "metal_stdlib": []byte("prelude")}
	opts := []string{"--gpu-architecture=sm_90", "--fmad=false"}
	base := cubinKey(unit, headers, opts, 13, 0)
	if again := cubinKey(unit, map[string][]byte{"metal_stdlib": []byte("prelude"), "kernels.metal": []byte("decls")}, opts, 13, 0); again != base {
		t.Error("the same inputs give another key")
	}
	for name, k := range map[string]string{
		"source":       cubinKey([]byte("kernel sourcf"), headers, opts, 13, 0),
		"header":       cubinKey(unit, map[string][]byte{"kernels.metal": []byte("decls"), "metal_stdlib": []byte("prelud3")}, opts, 13, 0),
		"header name":  cubinKey(unit, map[string][]byte{"kernels.metaX": []byte("decls"), "metal_stdlib": []byte("prelude")}, opts, 13, 0),
		"architecture": cubinKey(unit, headers, []string{"--gpu-architecture=sm_80", "--fmad=false"}, 13, 0),
		"nvrtc":        cubinKey(unit, headers, opts, 12, 8),
		"boundaries":   cubinKey(unit, headers, []string{"--gpu-architecture=sm_90--fmad=false"}, 13, 0),
	} {
		if k == base {
			t.Errorf("changing the %s leaves the key", name)
		}
	}
}

// A stored CUBIN reads back; a damaged or torn file, or none, is a miss;
// "off" stores and finds nothing.
func TestPipelineCache(t *testing.T) {
	c := openPipelineCache(filepath.Join(t.TempDir(), "pipes"))
	key := cubinKey([]byte("k"), nil, nil, 13, 0)
	if _, ok := c.get(key); ok {
		t.Fatal("an empty cache has the key")
	}
	bin := []byte("\x7fELF cubin bytes")
	if err := c.put(key, bin); err != nil {
		t.Fatal(err)
	}
	if got, ok := c.get(key); !ok || string(got) != string(bin) {
		t.Fatalf("got %q, %v; want the stored binary", got, ok)
	}
	data, err := os.ReadFile(c.path(key))
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	if err := os.WriteFile(c.path(key), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.get(key); ok {
		t.Error("a damaged file reads as a hit")
	}
	if err := os.WriteFile(c.path(key), data[:10], 0o644); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.get(key); ok {
		t.Error("a torn file reads as a hit")
	}
	c.drop(key)
	if _, err := os.Stat(c.path(key)); !os.IsNotExist(err) {
		t.Errorf("drop left the file: %v", err)
	}
	entries, _ := os.ReadDir(c.dir)
	if len(entries) != 0 {
		t.Errorf("the cache folder holds %d files after drop, want none (no temporary left behind)", len(entries))
	}
	off := openPipelineCache(PipelineCacheOff)
	if err := off.put(key, bin); err != nil {
		t.Fatal(err)
	}
	if _, ok := off.get(key); ok {
		t.Error("the cache that is off found a binary")
	}
}
