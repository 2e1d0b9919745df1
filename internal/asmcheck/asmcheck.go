// Package asmcheck holds the checks shared by the packages with generated
// avo assembly: that the checked-in assembly equals what its generator
// writes now (NotStale), and the planting of faults for their mutation
// controls (plant.go).
package asmcheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// NotStale runs the avo generator in dir (what go generate runs) into a
// temporary folder and fails t when the checked-in asm file or its Go
// declarations decl, of package pkg, differ from its output.
func NotStale(t testing.TB, dir, asm, decl, pkg string) {
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
