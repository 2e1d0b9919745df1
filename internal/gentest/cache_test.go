package gentest

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The hash covers gen, what it imports (found by walking the imports, not
// listed) and their embedded files, and nothing else: editing a template
// or a transitively imported package changes it; a test file or an
// unrelated package does not.
func TestSourcesHashFollowsTheGenerator(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module "+Module+"\n")
	write("gen/gen.go", "package gen\n\nimport _ \""+Module+"/a\"\n")
	write("gen/gen_test.go", "package gen\n")
	write("a/a.go", "package a\n\nimport \"embed\"\n\nimport _ \""+Module+"/b\"\n\n//go:embed t/*.tmpl\nvar fs embed.FS\n")
	write("a/t/x.tmpl", "x")
	write("b/b.go", "package b\n")
	write("c/c.go", "package c\n")
	hash := func() string {
		t.Helper()
		h, err := SourcesHash(root)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := hash()
	for _, tc := range []struct {
		file, text string
		changes    bool
	}{
		{"gen/gen_test.go", "package gen // edited\n", false},
		{"c/c.go", "package c // edited\n", false},
		{"a/t/x.tmpl", "y", true},
		{"b/b.go", "package b // edited\n", true},
		{"go.sum", "example.com/x v1.0.0 h1:abc=\n", true},
	} {
		write(tc.file, tc.text)
		if got := hash(); (got != base) != tc.changes {
			t.Errorf("after editing %s the hash changed: %v, want %v", tc.file, got != base, tc.changes)
		}
		base = hash()
	}
}

// Two processes storing the same artifact at once both end fine, and the
// folder holds a whole artifact; a later read gets the same files.
func TestStoreRaces(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "key")
	files := map[string][]byte{"manifest.json": []byte("{}"), "sub/graph.json.gz": []byte("g")}
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = store(dir, files) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	got, err := readFiles(dir)
	if err != nil || len(got) != len(files) || string(got["sub/graph.json.gz"]) != "g" {
		t.Fatalf("read back %v, %v", got, err)
	}
	left, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range left {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("temporary folder %s left behind", e.Name())
		}
	}
}
