package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

// ConvertOracle converts an oracle checkpoint with a quant plan into a GGUF
// file under dir, as `strata convert` does. Conversions are deterministic, so
// each (oracle, plan) is converted once and copied after (quantizing under
// the race detector is most of some tests' time): once per test binary (Main
// removes those files), and across the test binaries and runs through a disk
// cache (convcache.go) keyed by the converter's sources and the oracle's
// files.
func ConvertOracle(t testing.TB, name, plan, dir string) (string, *convert.Report) {
	t.Helper()
	conv, err := converted(name, plan)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+".gguf")
	data, err := os.ReadFile(conv.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rep := *conv.rep
	return out, &rep
}

// conversions caches ConvertOracle's files for the test binary's life.
var conversions struct {
	sync.Mutex
	dir   string
	files map[[2]string]*conversion
}

type conversion struct {
	once sync.Once
	path string
	rep  *convert.Report
	err  error
}

func converted(name, plan string) (*conversion, error) {
	conversions.Lock()
	if conversions.files == nil {
		conversions.files = map[[2]string]*conversion{}
	}
	if conversions.dir == "" {
		d, err := os.MkdirTemp("", "strata-conversions-")
		if err != nil {
			conversions.Unlock()
			return nil, err
		}
		conversions.dir = d
	}
	key := [2]string{name, plan}
	c := conversions.files[key]
	if c == nil {
		c = &conversion{path: filepath.Join(conversions.dir, fmt.Sprintf("%d-%s.gguf", len(conversions.files), name))}
		conversions.files[key] = c
	}
	conversions.Unlock()
	c.once.Do(func() { c.rep, c.err = convertCached(name, plan, c.path) })
	return c, c.err
}

func removeConversions() {
	conversions.Lock()
	defer conversions.Unlock()
	if conversions.dir != "" {
		os.RemoveAll(conversions.dir)
		conversions.dir, conversions.files = "", nil
	}
}

func convertOracleTo(name, plan, out string) (*convert.Report, error) {
	src := OracleDir(name)
	data, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		return nil, err
	}
	c, err := arch.ImportHF(data, models.ImportOptions{Name: name})
	if err != nil {
		return nil, err
	}
	if c.Quant, err = convert.ParsePlan(c.Quant, plan); err != nil {
		return nil, err
	}
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	return convert.Write(out, c, weights.NewHF(ck, c), convert.Options{})
}

// PackFile writes path.experts as `strata pack` does.
func PackFile(path string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	layers, err := weights.ExpertLayers(f)
	if err != nil {
		return err
	}
	return pack.Write(pack.Path(path), f, layers, nil)
}
