package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/resolve"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

// generate --hf DIR writes DIR/artifact for the config strata imports from
// DIR (with the run's options), and generate --gguf F writes F.artifact for
// the formats F's tensors hold (a q8_0 trunk here, not the model's f32).
func TestGenerateForModelFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny-a")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../../testdata/oracles/tiny-a/config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if status := run([]string{"generate", "--hf", dir, "--context", "512", "--prefill-rows", "8", "--moce"}, &stdout, &stderr); status != 0 {
		t.Fatalf("--hf: status %d: %s", status, stderr.String())
	}
	a, err := artifact.Load(os.DirFS(filepath.Join(dir, "artifact")))
	if err != nil {
		t.Fatal(err)
	}
	c, err := resolve.HF(dir, resolve.Options{Context: 512, PrefillRows: 8, MoCE: true})
	if err != nil {
		t.Fatal(err)
	}
	if key, _ := artifact.KeyOf(c); a.Key != key || a.Config.Runtime.ContextLength != 512 || !a.Config.Runtime.MoCE || len(a.Shapes("trunk")) != 5 {
		t.Errorf("--hf: artifact for context %d, MoCE %v, shapes %v", a.Config.Runtime.ContextLength, a.Config.Runtime.MoCE, a.Shapes("trunk"))
	}

	gguf := filepath.Join(t.TempDir(), "tiny-a.gguf")
	q8 := *c
	q8.Runtime = models.Runtime{ContextLength: c.Runtime.ContextLength}
	q8.Windows.PrefillRows = 16
	q8.Quant.Trunk = "q8_0"
	if _, err := convert.Write(gguf, &q8, weights.NewRandom(1), convert.Options{}); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if status := run([]string{"generate", "--gguf", gguf}, &stdout, &stderr); status != 0 {
		t.Fatalf("--gguf: status %d: %s", status, stderr.String())
	}
	b, err := artifact.Load(os.DirFS(gguf + ".artifact"))
	if err != nil {
		t.Fatal(err)
	}
	if f := b.Formats["layers.0.gdn.qkv"]; f != "q8_0" || !strings.Contains(stdout.String(), gguf+".artifact") {
		t.Errorf("--gguf: layers.0.gdn.qkv (split, as the GGUF stores it) stored as %q; stdout %q", f, stdout.String())
	}

	// Nothing overwrites a model: not its folder, not its file.
	for _, args := range [][]string{{"--hf", dir, "--out", dir}, {"--gguf", gguf, "--out", gguf}} {
		if status := run(append([]string{"generate"}, args...), &stdout, &stderr); status != 1 {
			t.Errorf("%v: status %d", args, status)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "config.json")); !bytes.Equal(got, cfg) {
		t.Error("the HF config was changed")
	}
	if status := run([]string{"generate", "--hf", dir, "../../models/tiny-a/model.toml"}, &stdout, &stderr); status != 2 {
		t.Errorf("--hf with a model.toml: status %d", status)
	}
}
