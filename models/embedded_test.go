package models

import (
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// The embedded configs are exactly the model folders, and parse to what
// Load reads from disk.
func TestEmbeddedMatchesDisk(t *testing.T) {
	paths, _ := filepath.Glob("*/model.toml")
	var want []string
	for _, p := range paths {
		want = append(want, filepath.Dir(p))
	}
	slices.Sort(want)
	if got := EmbeddedNames(); !slices.Equal(got, want) {
		t.Fatalf("embedded %v, on disk %v", got, want)
	}
	for _, name := range want {
		fromDisk, err := Load(filepath.Join(name, "model.toml"))
		if err != nil {
			t.Fatal(err)
		}
		built, err := Embedded(name)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(built, fromDisk) {
			t.Errorf("%s: embedded config differs from the file", name)
		}
	}
}

func TestEmbeddedUnknown(t *testing.T) {
	for _, name := range []string{"no-such-model", "", "../models", "tiny-a/model.toml"} {
		_, err := Embedded(name)
		if err == nil || !strings.Contains(err.Error(), "tiny-a") {
			t.Errorf("Embedded(%q): %v, want an error listing the models", name, err)
		}
	}
}
