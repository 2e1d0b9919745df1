package gentest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/internal/testcache"
	"github.com/strata-llm/strata/models"
)

// Module is the module path whose sources the cache hashes.
const Module = "github.com/strata-llm/strata"

// CacheEnv names the cache folder; "off" keeps every artifact in memory.
// Unset, the cache is os.UserCacheDir()/strata/gentest. Folders of other
// generator sources unused for a week are removed.
const CacheEnv = "STRATA_GENTEST_CACHE"

// cached is the artifact of c (whose key is key): read from the disk
// cache, or generated and written there. A cache that cannot be used (no
// module root found, a read-only folder) only costs the generation.
func cached(key string, c *models.Config) (*artifact.Artifact, error) {
	dir, err := cacheDir()
	if err != nil || dir == "" {
		files, err := generate(c)
		if err != nil {
			return nil, err
		}
		return loadFiles(files)
	}
	dir = filepath.Join(dir, key)
	if files, err := readFiles(dir); err == nil {
		if a, err := loadFiles(files); err == nil && a.Key == key {
			return a, nil
		}
	}
	files, err := generate(c)
	if err != nil {
		return nil, err
	}
	_ = store(dir, files) // best effort: the files are in hand either way
	return loadFiles(files)
}

var where struct {
	once sync.Once
	dir  string
	err  error
}

// cacheDir is the folder of this generator's artifacts: the cache root and
// a hash of the generator's sources ("" when the cache is off).
func cacheDir() (string, error) {
	where.once.Do(func() {
		base, err := testcache.Root(CacheEnv, "gentest")
		if err != nil || base == "" {
			where.err = err
			return
		}
		root, err := ModuleRoot()
		if err != nil {
			where.err = err
			return
		}
		h, err := SourcesHash(root)
		if err != nil {
			where.err = err
			return
		}
		where.dir = filepath.Join(base, h)
		prune(base, h, time.Now().Add(-staleAfter))
	})
	return where.dir, where.err
}

// staleAfter is how long a folder of another generator's artifacts (an
// older tree's, another worktree's) stays after its last use.
const staleAfter = 7 * 24 * time.Hour

// PruneStale removes the folders of base but keep unused for a week (the
// folders of other sources' hashes); keep is marked used now.
func PruneStale(base, keep string) { prune(base, keep, time.Now().Add(-staleAfter)) }

// prune removes the folders of base but keep not used since before; keep
// is marked used now. Failures are ignored: pruning only saves space.
func prune(base, keep string, before time.Time) {
	now := time.Now()
	_ = os.MkdirAll(filepath.Join(base, keep), 0o755)
	_ = os.Chtimes(filepath.Join(base, keep), now, now)
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == keep {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(before) {
			os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}

// ModuleRoot is the folder of the strata module's go.mod, found from the
// working directory up (a test runs in its package's folder).
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && modulePath(b) == Module {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", Module)
		}
		dir = up
	}
}

// modulePath is the module line of a go.mod.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// SourcesHash hashes what gen.Generate's output can depend on, in the
// module at root: go.sum (the third-party versions), and every non-test Go
// file of gen and of each package of the module it imports, directly or
// not, with the files their //go:embed lines name (templates/msl's
// templates, models/quant's tables). A package the generator comes to
// import is found by the same walk, so no list needs keeping.
func SourcesHash(root string) (string, error) { return PackagesHash(root, "gen") }

// PackagesHash is SourcesHash for what the module's packages pkgs (folders
// relative to root) can compute: go.sum and the non-test Go files of pkgs
// and of every module package they import, directly or not, with their
// embedded files. internal/e2e keys its cache of oracle conversions by it.
func PackagesHash(root string, pkgs ...string) (string, error) {
	names, err := sourceFiles(root, pkgs)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil && !(name == "go.sum" && errors.Is(err, fs.ErrNotExist)) {
			return "", err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// sourceFiles are the files SourcesHash hashes, slash-separated paths
// relative to root, sorted.
func sourceFiles(root string, pkgs []string) ([]string, error) {
	files := map[string]bool{"go.sum": true}
	seen := map[string]bool{}
	queue := slices.Clone(pkgs)
	for len(queue) > 0 {
		pkg := queue[0]
		queue = queue[1:]
		if seen[pkg] {
			continue
		}
		seen[pkg] = true
		imports, err := packageFiles(root, pkg, files)
		if err != nil {
			return nil, err
		}
		queue = append(queue, imports...)
	}
	names := make([]string, 0, len(files))
	for f := range files {
		names = append(names, f)
	}
	slices.Sort(names)
	return names, nil
}

// packageFiles adds the non-test Go files of package pkg (a folder of the
// module at root) and their embedded files to files, and returns the
// module's packages it imports.
func packageFiles(root, pkg string, files map[string]bool) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(pkg)))
	if err != nil {
		return nil, fmt.Errorf("the generator's package %s: %w", pkg, err)
	}
	var imports []string
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		rel := path.Join(pkg, name)
		files[rel] = true
		src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(token.NewFileSet(), rel, src, parser.ImportsOnly)
		if err != nil {
			return nil, err
		}
		for _, im := range f.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p == Module {
				imports = append(imports, ".")
			} else if sub, ok := strings.CutPrefix(p, Module+"/"); ok {
				imports = append(imports, sub)
			}
		}
		if err := embedded(root, pkg, src, files); err != nil {
			return nil, err
		}
	}
	return imports, nil
}

// embedded adds the files a Go file's //go:embed lines match.
func embedded(root, pkg string, src []byte, files map[string]bool) error {
	sc := bufio.NewScanner(bytes.NewReader(src))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "//go:embed ")
		if !ok {
			continue
		}
		for _, pat := range strings.Fields(rest) {
			pat = strings.TrimPrefix(strings.Trim(pat, "`\""), "all:")
			matches, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pkg), filepath.FromSlash(pat)))
			if err != nil {
				continue // not a pattern (a go:embed line inside a generated string)
			}
			for _, m := range matches {
				err := filepath.WalkDir(m, func(p string, d fs.DirEntry, err error) error {
					if err != nil || d.IsDir() {
						return err
					}
					rel, err := filepath.Rel(root, p)
					files[filepath.ToSlash(rel)] = true
					return err
				})
				if err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// readFiles reads an artifact folder's files.
func readFiles(dir string) (map[string][]byte, error) {
	if _, err := os.Stat(filepath.Join(dir, artifact.ManifestFile)); err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		files[filepath.ToSlash(rel)] = b
		return err
	})
	return files, err
}

// store writes files into a fresh folder beside dir and renames it to dir,
// so a reader sees no folder or a whole one. When another process got
// there first, its folder (the same bytes: generation is deterministic) is
// kept.
func store(dir string, files map[string][]byte) error {
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(parent, ".tmp-"+filepath.Base(dir)+"-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // gone once renamed
	for name, b := range files {
		p := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		if _, serr := os.Stat(filepath.Join(dir, artifact.ManifestFile)); serr == nil {
			return nil
		}
		return err
	}
	return nil
}
