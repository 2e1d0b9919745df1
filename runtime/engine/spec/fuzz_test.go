package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzGateLoad feeds arbitrary bytes to Gate.Load: it must never panic, a
// refused file leaves the gate cold, and an accepted one leaves a gate that
// picks, reports and saves. The seed corpus runs in every go test.
func FuzzGateLoad(f *testing.F) {
	p := filepath.Join(f.TempDir(), "seed.spec")
	if err := trained().Save(p, "k"); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte(`{"version":1,"key":"k","accept":[[{"v":1e308,"n":-5}]],"windows":{"-3":{"v":-1,"n":1}}}`))
	f.Add([]byte(`{"version":1,"key":"k","windows":{"99999999":{"v":1,"n":1}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(t.TempDir(), "f.spec")
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		g := NewGate(3)
		if err := g.Load(p, "k"); err != nil {
			if g.Pick(SourceSuffix, 3, nil) != 0 {
				t.Fatalf("a refused file left the gate warm: %v", err)
			}
			return
		}
		if k := g.Pick(SourceSuffix, 3, nil); k < 0 || k > 3 {
			t.Fatalf("pick %d out of 0…3", k)
		}
		_ = g.Report()
		if err := g.Save(filepath.Join(t.TempDir(), "again.spec"), "k"); err != nil {
			t.Fatal(err)
		}
	})
}
