package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/models"
)

// The checked-in generated/ folder is what the generator makes now: a stale
// artifact fails here (CI's diff check until go generate runs in CI).
func TestGeneratedIsCurrent(t *testing.T) {
	tomls, _ := filepath.Glob("../../models/*/model.toml")
	if len(tomls) == 0 {
		t.Fatal("no model folders found")
	}
	for _, path := range tomls {
		c, err := models.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		a, files, err := GenerateFiles(c)
		if err != nil {
			t.Fatal(err)
		}
		enc, err := a.Encode()
		if err != nil {
			t.Fatal(err)
		}
		for n, b := range enc {
			files[filepath.Join(gen.ArtifactDir, n)] = b
		}
		files[gen.ArtifactDir] = nil // the folder itself
		dir := filepath.Join("../../generated", c.Name)
		onDisk, _ := filepath.Glob(filepath.Join(dir, "*"))
		inner, _ := filepath.Glob(filepath.Join(dir, gen.ArtifactDir, "*"))
		var names []string
		for _, p := range append(onDisk, inner...) {
			names = append(names, strings.TrimPrefix(p, dir+string(filepath.Separator)))
		}
		sort.Strings(names)
		var want []string
		for n := range files {
			want = append(want, n)
		}
		sort.Strings(want)
		if !slices.Equal(names, want) {
			t.Errorf("%s: generated files %v, generator makes %v: run go generate ./...", c.Name, names, want)
			continue
		}
		for n, data := range files {
			if n == gen.ArtifactDir {
				continue
			}
			got, err := os.ReadFile(filepath.Join(dir, n))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Errorf("%s/%s is stale: run go generate ./...", c.Name, n)
			}
		}
	}
}

func TestGenerateWritesAndPrunes(t *testing.T) {
	out := t.TempDir()
	stale := filepath.Join(out, "tiny-a", "window-T99.json.gz")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if status := run([]string{"generate", "--out", out, "../../models/tiny-a/model.toml"}, &stdout, &stderr); status != 0 {
		t.Fatalf("status %d: %s", status, stderr.String())
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Error("a stale window graph survived")
	}
	got, _ := filepath.Glob(filepath.Join(out, "tiny-a", "artifact", "window-T*.json.gz"))
	if len(got) != 6 {
		t.Errorf("%d window graphs written, want 6 (T = 1..4, 16 and 16 with every row's logits): %v", len(got), got)
	}
	if status := run([]string{"generate", "--out", out, "no/such/model.toml"}, &stdout, &stderr); status != 1 {
		t.Errorf("a missing model.toml gave status %d, want 1", status)
	}
}
