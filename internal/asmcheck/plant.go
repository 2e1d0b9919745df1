package asmcheck

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The mutation controls of the packages with generated assembly plant one
// fault at a time through go's -overlay, so the tree is never edited: a
// faulty copy of one source file (Plant), the assembly regenerated from a
// faulty generator (Regenerate), and the package's tests run over the
// result (MustFail).

// Plant writes a copy of file (a path relative to the test's folder) into
// dir with its one occurrence of from replaced by to, and returns the
// overlay entry: file's absolute path and the copy's. It fails t when from
// does not appear exactly once (the fault is stale).
func Plant(t testing.TB, dir, file, from, to string) (path, broken string) {
	t.Helper()
	path, err := filepath.Abs(file)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), from); n != 1 {
		t.Fatalf("%q appears %d times in %s, expected once: the fault is stale", from, n, file)
	}
	broken = filepath.Join(dir, filepath.Base(file))
	if err := os.WriteFile(broken, []byte(strings.Replace(string(src), from, to, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, broken
}

// Overlay writes a go -overlay file into dir with the given replacements
// (absolute path → replacement) and returns its name.
func Overlay(t testing.TB, dir string, replace map[string]string) string {
	t.Helper()
	b, err := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(dir, "overlay-*.json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return f.Name()
}

// Regenerate runs the avo generator in genDir with the replacements into
// dir and returns the overlay entry for the package's assembly file asm
// (relative to the test's folder): its absolute path and the new file's.
// The new file has the checked-in file's header and is kept in the cache
// of CacheEnv, from where the same generator sources give it again.
func Regenerate(t testing.TB, dir, genDir string, replace map[string]string, asm, pkg string) (path, regenerated string) {
	t.Helper()
	path, err := filepath.Abs(asm)
	if err != nil {
		t.Fatal(err)
	}
	regenerated = filepath.Join(dir, filepath.Base(asm))
	key, err := generatorKey(genDir, replace, asm, pkg)
	if err != nil {
		t.Logf("no cache of the regenerated assembly: %v", err)
	}
	if fromCache(key, regenerated) {
		return path, regenerated
	}
	cmd := exec.Command("go", "run", "-overlay", Overlay(t, dir, replace), ".",
		"-out", regenerated, "-stubs", filepath.Join(dir, "decl.go"), "-pkg", pkg)
	cmd.Dir = genDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("generating with the fault: %v\n%s", err, out)
	}
	// The generated header names the output paths, here a new temporary
	// folder each run: with the checked-in file's header instead, the same
	// fault gives the same file, and go's build cache keeps the package's
	// compile from one run to the next (only the link is redone).
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(regenerated)
	if err != nil {
		t.Fatal(err)
	}
	header := have[:len(have)-len(dropFirstLine(have))]
	got = append(header[:len(header):len(header)], dropFirstLine(got)...)
	if err := os.WriteFile(regenerated, got, 0o644); err != nil {
		t.Fatal(err)
	}
	toCache(key, got)
	return path, regenerated
}

// MustFail runs the tests matching run in the test's package with the
// replacements and fails t unless they fail, with every one of want in
// their output.
func MustFail(t testing.TB, dir string, replace map[string]string, run string, want []string) {
	t.Helper()
	cmd := exec.Command("go", "test", "-overlay", Overlay(t, dir, replace), "-count=1", "-run", run, ".")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the tests pass with the fault planted:\n%s", out)
	}
	for _, w := range want {
		if !strings.Contains(string(out), w) {
			t.Errorf("no failure mentions %q:\n%s", w, out)
		}
	}
}
