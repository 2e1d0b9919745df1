package asmcheck

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/strata-llm/strata/internal/testcache"
)

// CacheEnv names the folder where Regenerate keeps the assembly each
// faulty generator wrote, keyed by a hash of everything the generator's
// output can depend on; "off" runs the generator every time. Unset, it is
// os.UserCacheDir()/strata/asmcheck. Entries unused for a week are
// removed.
//
// Running an avo generator costs about a second of CPU (its register
// allocation over thousands of lines), most of what a planted fault costs
// once go's build cache holds the faulty builds; the same generator
// sources with the same fault always write the same file.
const CacheEnv = "STRATA_ASMCHECK_CACHE"

// staleAfter is how long a cached file stays after its last use.
const staleAfter = 7 * 24 * time.Hour

var cacheBase struct {
	once sync.Once
	dir  string
}

// cacheDir is the cache folder, "" when there is none.
func cacheDir() string {
	cacheBase.once.Do(func() {
		base, err := testcache.Root(CacheEnv, "asmcheck")
		if err != nil || base == "" {
			return
		}
		if err := os.MkdirAll(base, 0o755); err != nil {
			return
		}
		cacheBase.dir = base
		prune(base, time.Now().Add(-staleAfter))
	})
	return cacheBase.dir
}

// prune removes the files of dir not used since before. Failures are
// ignored: pruning only saves space.
func prune(dir string, before time.Time) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.ModTime().Before(before) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// generatorKey hashes what the generator in genDir writes for package pkg's
// asm file with the replacements (absolute path → replacement): the Go
// version, the arguments, and every file of the generator's module (the
// nearest go.mod at or above genDir: its sources, go.mod and go.sum, so
// avo's version too), each replaced file read from its replacement.
func generatorKey(genDir string, replace map[string]string, asm, pkg string) (string, error) {
	dir, err := filepath.Abs(genDir)
	if err != nil {
		return "", err
	}
	root := dir
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		up := filepath.Dir(root)
		if up == root {
			return "", fmt.Errorf("no go.mod at or above %s", dir)
		}
		root = up
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%s\x00%s\x00", runtime.Version(), filepath.ToSlash(rel), filepath.Base(asm), pkg)
	hashed := map[string]bool{}
	add := func(path, name string) error {
		read := path
		if r, ok := replace[path]; ok {
			read = r
		}
		b, err := os.ReadFile(read)
		if err != nil {
			return err
		}
		hashed[path] = true
		fmt.Fprintf(h, "%s\x00%d\x00", name, len(b))
		h.Write(b)
		return nil
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		name, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		return add(path, filepath.ToSlash(name))
	})
	if err != nil {
		return "", err
	}
	// Replacements outside the module (none today) count by their paths.
	var outside []string
	for path := range replace {
		if !hashed[path] {
			outside = append(outside, path)
		}
	}
	slices.Sort(outside)
	for _, path := range outside {
		if err := add(path, path); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:32], nil
}

// fromCache copies the cached file of key to dst; false when there is
// none.
func fromCache(key, dst string) bool {
	dir := cacheDir()
	if dir == "" || key == "" {
		return false
	}
	src := filepath.Join(dir, key+".s")
	b, err := os.ReadFile(src)
	if err != nil || os.WriteFile(dst, b, 0o644) != nil {
		return false
	}
	now := time.Now()
	_ = os.Chtimes(src, now, now)
	return true
}

// toCache stores b as key's file, best effort: the file is in hand
// either way.
func toCache(key string, b []byte) {
	dir := cacheDir()
	if dir == "" || key == "" {
		return
	}
	f, err := os.CreateTemp(dir, key+".*.tmp")
	if err != nil {
		return
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(dir, key+".s"))
	}
	if err != nil {
		os.Remove(f.Name())
	}
}
