package planes

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
)

// CacheEnv names the folder decoded files are kept in; "off" turns the
// cache off. Unset, it is os.UserCacheDir()/strata/planes.
const CacheEnv = "STRATA_PLANES_CACHE"

// cacheDir is the decoded-file cache, or "" when there is none.
func cacheDir() string {
	switch d := os.Getenv(CacheEnv); d {
	case "off":
		return ""
	case "":
		base, err := os.UserCacheDir()
		if err != nil {
			return ""
		}
		return filepath.Join(base, "strata", "planes")
	default:
		return d
	}
}

// Cached returns the path of a decoded copy of fsys's name.planes in the
// cache, decoding and writing it there first when it is not yet: a file
// decoded once is mapped on later opens instead of decoded again (the
// default model's start-up; test binaries, whose race-instrumented inflate
// is ten times slower). A copy is named by its SHA-256 and checked against
// it before use. Cached returns "" and no error where there is no cache (or
// it cannot be written), or where name itself is there: the caller reads
// it (ReadFile) then.
func Cached(fsys fs.FS, name string) (string, error) {
	dir := cacheDir()
	if dir == "" {
		return "", nil
	}
	if _, err := fs.Stat(fsys, name); err == nil {
		return "", nil
	}
	enc, err := fs.ReadFile(fsys, name+Ext)
	if err != nil {
		return "", err
	}
	h, _, err := ParseHeader(enc)
	if err != nil {
		return "", fmt.Errorf("%s%s: %w", name, Ext, err)
	}
	p := filepath.Join(dir, h.SHA256+"-"+path.Base(name))
	if b, err := os.ReadFile(p); err == nil {
		sum := sha256.Sum256(b)
		if int64(len(b)) == h.Size && hex.EncodeToString(sum[:]) == h.SHA256 {
			return p, nil
		}
	}
	data, err := Decode(enc, func(base string) ([]byte, error) {
		base = path.Join(path.Dir(name), base)
		if p, err := Cached(fsys, base); err == nil && p != "" {
			return os.ReadFile(p) // checked against its hash by Cached
		}
		return ReadFile(fsys, base)
	})
	if err != nil {
		return "", fmt.Errorf("%s%s: %w", name, Ext, err)
	}
	if os.MkdirAll(dir, 0o755) != nil {
		return "", nil
	}
	tmp, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", nil
	}
	_, err = tmp.ReadFrom(bytes.NewReader(data))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p) // atomic: a reader sees the whole file or none
	}
	if err != nil {
		os.Remove(tmp.Name())
		return "", nil
	}
	return p, nil
}

// CachedOSFile is Cached for a file of the operating system's.
func CachedOSFile(name string) (string, error) {
	fsys, rel, err := osFS(name)
	if err != nil {
		return "", err
	}
	return Cached(fsys, rel)
}
