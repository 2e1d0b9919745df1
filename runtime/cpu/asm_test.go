package cpu

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestAssemblyNotStale regenerates gdn_amd64.s and its declarations with
// the avo generator in asm/ (what go generate runs) and fails when the
// checked-in files differ.
func TestAssemblyNotStale(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the generator (-short)")
	}
	checkGenerated(t, "asm", "gdn_amd64.s", "gdn_amd64_decl.go", "cpu")
}

func checkGenerated(t *testing.T, dir, asm, decl, pkg string) {
	t.Helper()
	tmp := t.TempDir()
	outS, outGo := filepath.Join(tmp, asm), filepath.Join(tmp, decl)
	cmd := exec.Command("go", "run", ".", "-out", outS, "-stubs", outGo, "-pkg", pkg)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run in %s: %v\n%s", dir, err, out)
	}
	for _, f := range [][2]string{{asm, outS}, {decl, outGo}} {
		have, err := os.ReadFile(f[0])
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(f[1])
		if err != nil {
			t.Fatal(err)
		}
		// The header names the output paths, which differ here.
		if !bytes.Equal(dropFirstLine(have), dropFirstLine(want)) {
			t.Errorf("%s is stale: run go generate in its package", f[0])
		}
	}
}

func dropFirstLine(b []byte) []byte {
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}
