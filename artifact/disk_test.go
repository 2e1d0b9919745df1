package artifact_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/models"
)

// Write then Load gives back the artifact: every manifest field, and every
// file byte for byte; writing again replaces the folder whole.
func TestWriteLoadRoundTrip(t *testing.T) {
	a, err := artifact.Lookup("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "out", "tiny-a.artifact")
	for range 2 {
		if err := a.Write(dir); err != nil {
			t.Fatal(err)
		}
	}
	b, err := artifact.Load(os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	bb := *b
	bb.Files = a.Files
	if !reflect.DeepEqual(&bb, a) {
		t.Error("the loaded manifest differs from the written one")
	}
	want, _ := a.Encode()
	got, err := b.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) || len(got) != 2+len(a.Graphs) {
		t.Fatalf("%d files, wrote %d (manifest, kernels and %d graphs)", len(got), len(want), len(a.Graphs))
	}
	for name, data := range want {
		if !bytes.Equal(got[name], data) {
			t.Errorf("%s differs after the round trip", name)
		}
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), ".*"))
	if len(left) != 0 {
		t.Errorf("temporary folders left: %v", left)
	}
}

// Write replaces only an artifact: a folder without a manifest (a model's
// own) or a file is refused and left as it was.
func TestWriteRefusesNonArtifacts(t *testing.T) {
	a, err := artifact.Lookup("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	model := filepath.Join(dir, "config.json")
	if err := os.WriteFile(model, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Write(dir); err == nil || !strings.Contains(err.Error(), "not an artifact") {
		t.Errorf("a model folder: %v", err)
	}
	if err := a.Write(model); err == nil || !strings.Contains(err.Error(), "not a folder") {
		t.Errorf("a file: %v", err)
	}
	if b, _ := os.ReadFile(model); string(b) != "{}" {
		t.Error("the input was changed")
	}
}

// Load refuses an artifact whose manifest does not hold together: a key
// that is not its config's, a params header this runtime does not write,
// another schema, a missing graph.
func TestLoadRefusesInconsistentManifests(t *testing.T) {
	a, err := artifact.Lookup("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	files, err := a.Encode()
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) artifact.MapFS {
		var m map[string]any
		if err := json.Unmarshal(files[artifact.ManifestFile], &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, _ := json.Marshal(m)
		out := artifact.MapFS{}
		for k, v := range files {
			out[k] = v
		}
		out[artifact.ManifestFile] = b
		return out
	}
	cases := []struct {
		name string
		fsys artifact.MapFS
		want string
	}{
		{"key", edit(func(m map[string]any) {
			m["config"].(map[string]any)["Runtime"].(map[string]any)["ContextLength"] = 8192.0
		}), "is not its config's key"},
		{"params", edit(func(m map[string]any) { m["params"].(map[string]any)["pos"] = 2.0 }), "params header field pos"},
		{"schema", edit(func(m map[string]any) { m["schema"] = 99.0 }), "schema 99"},
	}
	missing := edit(func(map[string]any) {})
	delete(missing, "window-T16.json.gz")
	cases = append(cases, struct {
		name string
		fsys artifact.MapFS
		want string
	}{"graph", missing, "window-T16.json.gz"})
	for _, c := range cases {
		if _, err := artifact.Load(c.fsys); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		}
	}
	if _, err := artifact.Load(edit(func(map[string]any) {})); err != nil {
		t.Errorf("the unedited manifest: %v", err)
	}
}

// The key changes with everything the graphs depend on, and with nothing
// else.
func TestKeyCoversWhatTheGraphsRead(t *testing.T) {
	base, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	key := func(f func(c *models.Config)) string {
		c := *base
		c.Quant.Tensors = nil
		f(&c)
		k, err := artifact.KeyOf(&c)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(func(*models.Config) {})
	a, _ := artifact.Lookup("tiny-a")
	if k0 != a.Key {
		t.Fatalf("models/tiny-a's key %s is not generated/tiny-a's %s", k0, a.Key)
	}
	for name, f := range map[string]func(c *models.Config){
		"context":      func(c *models.Config) { c.Runtime.ContextLength *= 2 },
		"prefill rows": func(c *models.Config) { c.Windows.PrefillRows++ },
		"decode rows":  func(c *models.Config) { c.Windows.MaxDecodeRows-- },
		"moce":         func(c *models.Config) { c.Runtime.MoCE = true; c.Runtime.MoCEDefaults() },
		"read-ahead":   func(c *models.Config) { c.Runtime.ReadAhead = true }, // a matmul and a router per MoE layer
		"eps":          func(c *models.Config) { c.Architecture.RMSNormEps *= 2 },
		"trunk format": func(c *models.Config) { c.Quant.Trunk = "q8_0" },
		"one tensor": func(c *models.Config) {
			c.Quant.Tensors = &models.TensorFormats{ByName: map[string]string{base.Tensors()[2].Name: "q8_0"}}
		},
	} {
		if key(f) == k0 {
			t.Errorf("%s: the key did not change", name)
		}
	}
	for name, f := range map[string]func(c *models.Config){
		"name":    func(c *models.Config) { c.Name = "copy" },
		"eos":     func(c *models.Config) { c.Architecture.EOSTokenIDs = []int{7} },
		"threads": func(c *models.Config) { c.Runtime.Threads = 3 },
		"λ off":   func(c *models.Config) { c.Runtime.MoCELambda = 0.5 }, // read only with MoCE on
	} {
		if key(f) != k0 {
			t.Errorf("%s: the key changed", name)
		}
	}
}
