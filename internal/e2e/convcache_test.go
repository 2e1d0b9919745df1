package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// TestConvertCacheServesTheSameConversion: a conversion read back from the
// disk cache has a fresh conversion's bytes and an equal report.
func TestConvertCacheServesTheSameConversion(t *testing.T) {
	t.Setenv(ConvertCacheEnv, t.TempDir())
	convCache.once, convCache.dir = sync.Once{}, ""
	t.Cleanup(func() { convCache.once, convCache.dir = sync.Once{}, "" })
	dir := t.TempDir()
	const name, plan = "tiny-a", "trunk=q8_0"
	fresh := filepath.Join(dir, "fresh.gguf")
	want, err := convertOracleTo(name, plan, fresh)
	if err != nil {
		t.Fatal(err)
	}
	first, second := filepath.Join(dir, "first.gguf"), filepath.Join(dir, "second.gguf")
	if _, err := convertCached(name, plan, first); err != nil {
		t.Fatal(err)
	}
	if matches, _ := filepath.Glob(filepath.Join(convCacheDir(), name+"-*.json")); len(matches) != 1 {
		t.Fatalf("cache holds %v, want one report", matches)
	}
	got, err := convertCached(name, plan, second)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(fresh)
	b, _ := os.ReadFile(second)
	if len(a) == 0 || !bytes.Equal(a, b) {
		t.Errorf("the cached file (%d B) differs from a fresh conversion (%d B)", len(b), len(a))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("cached report %+v, fresh %+v", got, want)
	}
}
