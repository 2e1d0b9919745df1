package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/strata-llm/strata/internal/gentest"
	"github.com/strata-llm/strata/internal/testcache"
	"github.com/strata-llm/strata/runtime/tools/convert"
)

// ConvertCacheEnv names the folder of the disk cache of oracle conversions;
// "off" converts in every test binary. Unset, it is
// os.UserCacheDir()/strata/conversions. Folders of other converter sources
// unused for a week are removed.
const ConvertCacheEnv = "STRATA_CONVERT_CACHE"

// converterPackages are what convertOracleTo computes with; the cache key
// hashes their sources and those of every module package they import.
var converterPackages = []string{"runtime/tools/convert", "runtime/arch", "runtime/format/safetensors", "runtime/weights", "models"}

var convCache struct {
	once sync.Once
	dir  string // "": no disk cache
}

// convCacheDir is the folder of this converter's files: the cache root
// joined with a hash of the converter's sources and of this file's
// convertOracleTo ("" when off or unusable: then every binary converts).
func convCacheDir() string {
	convCache.once.Do(func() {
		base, err := testcache.Root(ConvertCacheEnv, "conversions")
		if err != nil || base == "" {
			return
		}
		root := Path()
		h, err := gentest.PackagesHash(root, converterPackages...)
		if err != nil {
			return
		}
		self, err := os.ReadFile(filepath.Join(root, "internal", "e2e", "convert.go"))
		if err != nil {
			return
		}
		sum := sha256.Sum256(append([]byte(h+"\x00"), self...))
		key := hex.EncodeToString(sum[:])[:16]
		gentest.PruneStale(base, key)
		convCache.dir = filepath.Join(base, key)
	})
	return convCache.dir
}

// oracleHash hashes an oracle folder's files (names, sizes, bytes).
func oracleHash(dir string) (string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", err
	}
	names := []string{}
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	h := sha256.New()
	for _, n := range names {
		f, err := os.Open(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		fi, err := f.Stat()
		if err == nil {
			fmt.Fprintf(h, "%s\x00%d\x00", n, fi.Size())
			_, err = io.Copy(h, f)
		}
		f.Close()
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// convertCached writes the conversion of (name, plan) to out: copied from
// the disk cache when an earlier binary or run made it with the same
// converter and oracle files, else converted and stored there (best
// effort: a cache that cannot be written only costs the conversion).
func convertCached(name, plan, out string) (*convert.Report, error) {
	dir := convCacheDir()
	if dir == "" {
		return convertOracleTo(name, plan, out)
	}
	oh, err := oracleHash(OracleDir(name))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(name + "\x00" + plan + "\x00" + oh))
	base := filepath.Join(dir, name+"-"+hex.EncodeToString(sum[:])[:16])
	if rep, err := readCached(base, out); err == nil {
		return rep, nil
	}
	rep, err := convertOracleTo(name, plan, out)
	if err != nil {
		return nil, err
	}
	_ = storeCached(base, out, rep)
	return rep, nil
}

// readCached copies base.gguf to out and decodes base.json's report; the
// report is written last, so its presence means a whole file.
func readCached(base, out string) (*convert.Report, error) {
	b, err := os.ReadFile(base + ".json")
	if err != nil {
		return nil, err
	}
	var rep convert.Report
	if err := json.Unmarshal(b, &rep); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(base + ".gguf")
	if err != nil {
		return nil, err
	}
	return &rep, os.WriteFile(out, data, 0o644)
}

// storeCached writes the file and then its report, each through a rename,
// so a reader (another package's binary) sees whole files or none.
func storeCached(base, path string, rep *convert.Report) error {
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	js, err := json.Marshal(rep)
	if err != nil {
		return err
	}
	for _, f := range []struct {
		ext string
		b   []byte
	}{{".gguf", data}, {".json", js}} {
		tmp, err := os.CreateTemp(filepath.Dir(base), ".tmp-*")
		if err != nil {
			return err
		}
		_, err = tmp.Write(f.b)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), base+f.ext)
		}
		if err != nil {
			os.Remove(tmp.Name())
			return err
		}
	}
	return nil
}
