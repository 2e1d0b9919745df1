// Package srcdigest hashes the source of the generator (gen, graph and the
// MSL templates), so an artifact's key names the generator that made it:
// an artifact cached by an older strata is then regenerated rather than
// loaded by a runtime that expects other kernels or constants.
package srcdigest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
)

// Dirs are the folders, relative to the module root, whose files decide
// what the generator emits: its Go code (tests aside), the window graph
// package and the kernel templates.
var Dirs = []string{"gen", "graph", "templates/msl"}

// Of is the SHA-256 of the generator's source under the module root root:
// every non-test .go file and every .tmpl file in Dirs (and their
// subfolders), by slash path and content, in path order.
func Of(root string) (string, error) {
	fsys := os.DirFS(root)
	var files []string
	for _, d := range Dirs {
		err := fs.WalkDir(fsys, d, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if e.IsDir() {
				return nil
			}
			name := path.Base(p)
			if (strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go")) || strings.HasSuffix(name, ".tmpl") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("hashing the generator's source: %w", err)
		}
	}
	sort.Strings(files)
	h := sha256.New()
	for _, p := range files {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return "", fmt.Errorf("hashing the generator's source: %w", err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
