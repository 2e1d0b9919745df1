package stream

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzLoadUsage feeds arbitrary bytes to LoadUsage for a 3 × 8 model: it
// must never panic, never allocate past the model's size (a count in the
// file is checked first), and a history it accepts saves and loads back the
// same. The seed corpus runs in every go test.
func FuzzLoadUsage(f *testing.F) {
	dir := f.TempDir()
	u := NewUsage(3, 8)
	for i := range u.Counts {
		u.Counts[i] = float64(i % 5)
	}
	u.Windows = 12
	p := filepath.Join(dir, "seed.usage")
	if err := u.Save(p, []int{4, 0, 23}); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)-2])
	hugeOrder := bytes.Clone(good)
	binary.LittleEndian.PutUint32(hugeOrder[len(usageMagic)+20:], 0xfffffff0) // the LRU count
	f.Add(hugeOrder)
	f.Add([]byte(usageMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f.usage")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		u, err := LoadUsage(p, 3, 8)
		if err != nil {
			return
		}
		if len(u.Counts) != 24 || len(u.Order) > 24 {
			t.Fatalf("accepted %d counts and %d LRU entries for 24 experts", len(u.Counts), len(u.Order))
		}
		q := filepath.Join(t.TempDir(), "again.usage")
		if err := u.Save(q, u.Order); err != nil {
			t.Fatal(err)
		}
		back, err := LoadUsage(q, 3, 8)
		if err != nil || !reflect.DeepEqual(back.Counts, u.Counts) || !reflect.DeepEqual(back.Order, u.Order) || back.Windows != u.Windows {
			t.Fatalf("round trip: %v", err)
		}
	})
}
