package main

import (
	"bytes"
	"compress/gzip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// strata bench --cpuprofile writes a profile (gzip-compressed protobuf, what
// go tool pprof reads); a path that cannot be created is an error naming
// the flag.
func TestBenchCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if _, errText, status := runStrata(t, "bench", "-p", "4", "-n", "2", "-r", "1", "--warmup", "0", "--cpuprofile", path); status != 0 {
		t.Fatalf("status %d: %s", status, errText)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gzip.NewReader(bytes.NewReader(data)); err != nil {
		t.Fatalf("%s is not a pprof profile: %v", path, err)
	}
	bad := filepath.Join(t.TempDir(), "missing", "cpu.prof")
	if _, errText, status := runStrata(t, "bench", "-p", "4", "-n", "2", "-r", "1", "--warmup", "0", "--cpuprofile", bad); status == 0 || !strings.Contains(errText, "--cpuprofile") {
		t.Errorf("unwritable profile path: status %d, stderr %q", status, errText)
	}
}
