package models

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
)

// The checked-in model configs travel inside the binaries, so commands that
// take a model by name work from any directory.
//
//go:embed */model.toml
var embedded embed.FS

// EmbeddedNames lists the model configs built into the binary, sorted.
func EmbeddedNames() []string {
	paths, _ := fs.Glob(embedded, "*/model.toml")
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = path.Dir(p)
	}
	slices.Sort(names)
	return names
}

// Embedded parses and validates the built-in config of the model called name
// (the folder name under models/).
func Embedded(name string) (*Config, error) {
	if name == "" || strings.ContainsAny(name, `/\`) || name == "." || name == ".." {
		return nil, fmt.Errorf("model %q: expected the name of a folder under models/ (one of %s)", name, strings.Join(EmbeddedNames(), ", "))
	}
	file := "models/" + name + "/model.toml"
	data, err := embedded.ReadFile(name + "/model.toml")
	if err != nil {
		return nil, fmt.Errorf("no built-in model %q (have %s): %w", name, strings.Join(EmbeddedNames(), ", "), err)
	}
	return Parse(data, file)
}
