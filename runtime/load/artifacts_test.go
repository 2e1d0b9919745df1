package load_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/format/planes"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/resolve"
)

// The embedded default runs through its checked-in artifact: the config
// strata imports from models/tiny-go/config.json has the key of
// generated/tiny-go (made from models/tiny-go/model.toml), and opening the
// default finds it compiled in, with Generate unset.
func TestDefaultRunsCheckedInArtifact(t *testing.T) {
	c, err := resolve.HF("../../models/tiny-go", resolve.Options{})
	if err != nil {
		t.Fatal(err)
	}
	key, err := artifact.KeyOf(c)
	if err != nil {
		t.Fatal(err)
	}
	a, err := artifact.Lookup(load.DefaultModelName)
	if err != nil {
		t.Fatal(err)
	}
	if key != a.Key {
		t.Fatalf("the default's key %s is not generated/tiny-go's %s: models/tiny-go/model.toml and models/tiny-go/config.json differ", key, a.Key)
	}
	l, err := load.Default(load.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.ArtifactFrom != load.FromCompiledIn || l.Artifact != a {
		t.Errorf("the default ran the artifact from %q", l.ArtifactFrom)
	}
	want, err := l.Model.NewSession().Generate(load.DefaultPrompt, 6, engine.GenerateOptions{PrefillRows: l.PrefillRows})
	if err != nil {
		t.Fatal(err)
	}
	// A shorter context and shorter windows than any artifact's: the
	// compiled-in artifact serves (its longer context, its largest shape
	// that fits), says so, and decodes the same tokens.
	var notes []string
	short, err := load.Default(load.Options{Context: 1024, PrefillRows: 3, Note: func(s string) { notes = append(notes, s) }})
	if err != nil {
		t.Fatal(err)
	}
	defer short.Close()
	if short.Artifact != a || short.Config.Runtime.ContextLength != 4096 || short.PrefillRows != 3 {
		t.Errorf("context 1024, prefill rows 3: artifact %s from %q, context %d, prefill rows %d", short.Artifact.Name, short.ArtifactFrom, short.Config.Runtime.ContextLength, short.PrefillRows)
	}
	if len(notes) == 0 || !strings.Contains(notes[0], "stratagen generate --hf models/tiny-go --context 1024 --prefill-rows 3 --out DIR") {
		t.Errorf("notes %q: want the artifact it ran and the command that makes an exact one", notes)
	}
	got, err := short.Model.NewSession().Generate(load.DefaultPrompt, 6, engine.GenerateOptions{PrefillRows: short.PrefillRows})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("the shorter windows decode %v, the artifact's own %v", got, want)
	}
	// Other routing is another artifact: the error says which command
	// makes it.
	_, err = load.Default(load.Options{MoCE: true, ArenaExperts: 64})
	if err == nil || !strings.Contains(err.Error(), "stratagen generate --hf models/tiny-go --moce --out DIR") || !strings.Contains(err.Error(), "key ") {
		t.Errorf("no artifact for MoCE: %v", err)
	}
}

// An artifact written by stratagen beside an HF checkpoint (DIR/artifact)
// or given with --artifacts is found by its key; a model with none names
// the command.
func TestArtifactBesideTheModel(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "tiny-a")
	if err := os.Mkdir(model, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"config.json", "model.safetensors"} {
		b, err := planes.ReadOSFile(filepath.Join("../../testdata/oracles/tiny-a", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(model, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	opt := load.Options{PrefillRows: 5, History: "-"}
	_, err := load.HF(model, opt)
	if err == nil || !strings.Contains(err.Error(), "run  stratagen generate --hf "+model+" --prefill-rows 5") {
		t.Fatalf("no artifact: %v", err)
	}
	c, err := resolve.HF(model, opt.ResolveOptions())
	if err != nil {
		t.Fatal(err)
	}
	a, err := gen.Generate(c)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(dir, "elsewhere", "tiny-a")
	if err := a.Write(elsewhere); err != nil {
		t.Fatal(err)
	}
	opt.Artifacts = []string{filepath.Dir(elsewhere)} // a folder of artifact folders
	l, err := load.HF(model, opt)
	if err != nil {
		t.Fatal(err)
	}
	if l.ArtifactFrom != elsewhere || l.PrefillRows != 5 {
		t.Errorf("ran the artifact from %q with %d prefill rows", l.ArtifactFrom, l.PrefillRows)
	}
	l.Close()
	opt.Artifacts = nil
	if err := a.Write(artifact.DirFor(false, model)); err != nil {
		t.Fatal(err)
	}
	if l, err = load.HF(model, opt); err != nil {
		t.Fatal(err)
	}
	if l.ArtifactFrom != filepath.Join(model, "artifact") {
		t.Errorf("ran the artifact from %q", l.ArtifactFrom)
	}
	l.Close()
	// The artifact beside it is for 5 prefill rows: it serves the config's
	// 64 too, in its own windows, and says so.
	var notes []string
	if l, err = load.HF(model, load.Options{History: "-", Note: func(s string) { notes = append(notes, s) }}); err != nil {
		t.Fatal(err)
	}
	if l.PrefillRows != 5 || len(notes) == 0 || !strings.Contains(notes[0], "prefill rows 64: running the one for") {
		t.Errorf("the default windows ran %d prefill rows; notes %q", l.PrefillRows, notes)
	}
	l.Close()
	// MoCE routing is another key the artifact cannot serve, and the error
	// says what it found.
	_, err = load.HF(model, load.Options{History: "-", MoCE: true, ArenaExperts: 8})
	if err == nil || !strings.Contains(err.Error(), "artifacts found that do not match") {
		t.Errorf("mismatched artifact: %v", err)
	}
	// A broken artifact beside it is passed over, and named.
	if err := os.WriteFile(filepath.Join(model, "artifact", artifact.ManifestFile), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = load.HF(model, opt)
	if err == nil || !strings.Contains(err.Error(), "unusable") || !strings.Contains(err.Error(), "stratagen generate") {
		t.Errorf("broken artifact: %v", err)
	}
	opt.Artifacts = []string{filepath.Dir(elsewhere)}
	if l, err = load.HF(model, opt); err != nil {
		t.Errorf("a broken artifact beside the model hid the one in --artifacts: %v", err)
	} else {
		l.Close()
	}
}
