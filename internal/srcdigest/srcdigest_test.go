package srcdigest

import (
	"os"
	"path/filepath"
	"testing"
)

// TestOf: the digest changes with a template's or a Go file's content and
// with a file's name, and ignores tests and files of other kinds.
func TestOf(t *testing.T) {
	root := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		p = filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range Dirs {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("gen/a.go", "package gen")
	write("templates/msl/formats/q.metal.tmpl", "x")
	digest := func() string {
		t.Helper()
		d, err := Of(root)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	base := digest()
	write("gen/a_test.go", "package gen // tests do not count")
	write("graph/notes.md", "neither do other files")
	if d := digest(); d != base {
		t.Fatalf("a test or a non-source file changed the digest")
	}
	write("templates/msl/formats/q.metal.tmpl", "y")
	changed := digest()
	if changed == base {
		t.Fatalf("a template's edit left the digest as it was")
	}
	if err := os.Rename(filepath.Join(root, "gen/a.go"), filepath.Join(root, "gen/b.go")); err != nil {
		t.Fatal(err)
	}
	if d := digest(); d == changed {
		t.Fatalf("a renamed Go file left the digest as it was")
	}
	if _, err := Of(filepath.Join(root, "missing")); err == nil {
		t.Fatalf("a root without the folders hashed without an error")
	}
}
