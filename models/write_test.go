package models

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

func roundTrip(t *testing.T, c *Config) {
	t.Helper()
	text, err := c.MarshalTOML()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(text, "marshalled")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("round trip changed the config:\n got %+v\nwant %+v\n%s", back, c, text)
	}
	again, err := back.MarshalTOML()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(text, again) {
		t.Errorf("MarshalTOML is not deterministic:\n%s\n---\n%s", text, again)
	}
}

func TestMarshalRoundTripCheckedIn(t *testing.T) {
	for _, name := range checkedInModels {
		c, err := Load(filepath.Join(name, "model.toml"))
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, c)
	}
}

// Random valid configs, with floats that have no short decimal form.
func TestMarshalRoundTripRandom(t *testing.T) {
	base, err := Load("qwen3-next-80b-a3b/model.toml")
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	formats := []string{"f32", "f16", "bf16"}
	for i := 0; i < 200; i++ {
		c := *base
		a := &c.Architecture
		a.RMSNormEps = math.Exp(rng.Float64()*60 - 50)
		a.Attention.RopeTheta = math.Exp(rng.Float64() * 40)
		a.Attention.PartialRotaryFactor = float64(1+rng.IntN(128)) / 128 // rotary dim 2 … 256, even
		a.HiddenSize = 1 + rng.IntN(1<<20)
		a.TieWordEmbeddings = rng.IntN(2) == 0
		a.MTP.NumLayers = rng.IntN(3)
		c.Quant = QuantPlan{Trunk: formats[rng.IntN(3)], Experts: formats[rng.IntN(3)], Embeddings: formats[rng.IntN(3)], Head: formats[rng.IntN(3)], Router: []string{"", formats[rng.IntN(3)]}[rng.IntN(2)], Rows: []string{"", "pad", "fallback"}[rng.IntN(3)]}
		c.Runtime.Threads = rng.IntN(64)
		if err := c.Validate(); err != nil {
			t.Fatalf("generator made an invalid config: %v", err)
		}
		roundTrip(t, &c)
	}
}

func TestFormatFloatParsesBack(t *testing.T) {
	for _, f := range []float64{0, 1, 1e-6, 1e7, 0.1, 1.0 / 3, 5e-324, 1e300, -2.5, 123456789012345678, 1e-5, 1e15} {
		s := formatFloat(f)
		var v struct{ X float64 }
		if _, err := toml.Decode("X = "+s, &v); err != nil || v.X != f {
			t.Errorf("%v: wrote %q, read back %v (%v)", f, s, v.X, err)
		}
	}
	if s := formatFloat(1e7); s != "10000000.0" {
		t.Errorf("1e7 written as %q; want a plain float", s)
	}
}

func TestQuoteTOML(t *testing.T) {
	for _, s := range []string{"", `a"b\c`, "tab\tnew\nline\x01\x7f", "ünïcode ✓"} {
		q, err := quoteTOML(s)
		if err != nil {
			t.Fatal(err)
		}
		var v struct{ X string }
		if _, err := toml.Decode("X = "+q, &v); err != nil || v.X != s {
			t.Errorf("%q: wrote %s, read back %q (%v)", s, q, v.X, err)
		}
	}
	if _, err := quoteTOML("\xff"); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
}

func TestMarshalHeader(t *testing.T) {
	c := loadTinyA(t)
	text, err := c.MarshalTOMLFrom(`testdata/oracles/tiny-a/config.json`)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(text), "# Written by `stratagen import-hf` from testdata/oracles/tiny-a/config.json.\n") {
		t.Errorf("header:\n%s", text)
	}
	// Sections appear in struct order.
	last := -1
	for _, s := range []string{"[architecture]", "[architecture.attention]", "[architecture.linear_attention]",
		"[architecture.moe]", "[architecture.mtp]", "[quant]", "[windows]", "[runtime]"} {
		i := bytes.Index(text, []byte("\n"+s))
		if i <= last {
			t.Errorf("%s at %d, after %d", s, i, last)
		}
		last = i
	}
}

func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.toml")
	if err := os.WriteFile(path, []byte("old contents"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := loadTinyA(t)
	if err := WriteFile(path, c); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, c) {
		t.Errorf("wrote %+v, read %+v", c, back)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "model.toml" {
		t.Errorf("directory holds %v; want only model.toml, no temp files", entries)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, want 0644", fi.Mode().Perm())
	}
}

func TestWriteFileFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	// The target is a directory, so the final rename fails after the temp file exists.
	target := filepath.Join(dir, "model.toml")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(target, loadTinyA(t)); err == nil || !strings.Contains(err.Error(), target) {
		t.Fatalf("err = %v; want a failure naming %s", err, target)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %v; the temp file was left behind", entries)
	}

	if err := WriteFile(filepath.Join(dir, "no", "such", "dir.toml"), loadTinyA(t)); err == nil {
		t.Error("writing into a missing directory succeeded")
	}
}
