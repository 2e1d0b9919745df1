package gentest

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
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

// On this module the walk reaches what the generator is made of: its
// packages (graph, artifact, models, models/quant, templates/msl), the
// MSL templates and the quant tables they embed, and nothing of the
// runtime or any test file.
func TestSourcesOfThisGenerator(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := sourceFiles(root, []string{"gen"})
	if err != nil {
		t.Fatal(err)
	}
	has := func(prefix, suffix string) bool {
		return slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, prefix) && strings.HasSuffix(f, suffix) })
	}
	for _, want := range [][2]string{{"gen/", ".go"}, {"graph/", ".go"}, {"artifact/", ".go"}, {"models/", ".go"},
		{"models/quant/", ".go"}, {"models/quant/", ".json"}, {"models/", "/model.toml"}, {"templates/msl/", ".metal.tmpl"},
		{"templates/msl/formats/", ".metal.tmpl"}, {"go.sum", ""}} {
		if !has(want[0], want[1]) {
			t.Errorf("no %s…%s among the generator's %d files", want[0], want[1], len(files))
		}
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "runtime/") || strings.HasPrefix(f, "cmd/") {
			t.Errorf("%s is hashed: not the generator's", f)
		}
	}
}

// A folder of other generator sources unused for longer than staleAfter
// goes; a recent one and the one in use stay.
func TestPruneStale(t *testing.T) {
	base := t.TempDir()
	for _, d := range []string{"old", "recent", "mine"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	long := time.Now().Add(-2 * staleAfter)
	for _, d := range []string{"old", "mine"} {
		if err := os.Chtimes(filepath.Join(base, d), long, long); err != nil {
			t.Fatal(err)
		}
	}
	prune(base, "mine", time.Now().Add(-staleAfter))
	for d, want := range map[string]bool{"old": false, "recent": true, "mine": true} {
		if _, err := os.Stat(filepath.Join(base, d)); (err == nil) != want {
			t.Errorf("%s: present %v, want %v", d, err == nil, want)
		}
	}
}
