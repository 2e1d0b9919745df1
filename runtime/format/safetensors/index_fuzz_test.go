package safetensors

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenDirIndex feeds arbitrary model.safetensors.index.json contents to
// OpenDir over a directory with two real shards: it must never panic, never
// open a shard outside the directory, and every tensor an accepted index
// lists is served from its shard. The seed corpus runs in every go test.
func FuzzOpenDirIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":16},"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"s1.safetensors","b":"s1.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../s1.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"/etc/passwd"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":"s1.safetensors"`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, index []byte) {
		dir := t.TempDir()
		for _, s := range []struct {
			name, tensor string
		}{{"s1.safetensors", "a"}, {"s2.safetensors", "b"}} {
			if err := WriteFile(filepath.Join(dir, s.name), []Tensor{{Name: s.tensor, DType: "F32", Shape: []int{2}, Data: make([]byte, 8)}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, IndexFileName), index, 0o644); err != nil {
			t.Fatal(err)
		}
		ck, err := OpenDir(dir)
		if err != nil {
			return
		}
		defer ck.Close()
		for _, name := range ck.Names() {
			x, ok := ck.Tensor(name)
			if !ok || len(x.Data) != 8 {
				t.Fatalf("tensor %s listed but not served (%v, %d bytes)", name, ok, len(x.Data))
			}
			if rel, err := filepath.Rel(dir, ck.FileOf(name)); err != nil || !filepath.IsLocal(rel) {
				t.Fatalf("tensor %s served from %s, outside %s", name, ck.FileOf(name), dir)
			}
		}
	})
}
