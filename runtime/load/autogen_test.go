package load

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/weights"
)

const tinyAOracle = "../../testdata/oracles/tiny-a"

// buildStratagen builds cmd/stratagen into a temporary folder, once per
// test binary (RemoveStratagen removes it after the run).
var buildStratagen = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "strata-stratagen-")
	if err != nil {
		return "", err
	}
	stratagenDir = dir
	exe := filepath.Join(dir, StratagenName)
	out, err := exec.Command("go", "build", "-o", exe, "github.com/strata-llm/strata/cmd/stratagen").CombinedOutput()
	if err != nil {
		return "", &exec.Error{Name: "go build ./cmd/stratagen: " + strings.TrimSpace(string(out)), Err: err}
	}
	return exe, nil
})

// stratagenDir is the folder buildStratagen made, "" before.
var stratagenDir string

// RemoveStratagen removes the stratagen the tests built (TestMain calls
// it once every test has run).
func RemoveStratagen() {
	if stratagenDir != "" {
		os.RemoveAll(stratagenDir)
	}
}

// stratagenExe is the built stratagen (these tests set no in-process
// Options.Generate, so the step under test runs).
func stratagenExe(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cmd/stratagen")
	}
	exe, err := buildStratagen()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// cacheEntries is the names in the artifact cache.
func cacheEntries(t *testing.T, cache string) []string {
	t.Helper()
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// A model without an artifact: the first load runs stratagen into the
// cache and says so, the second finds it there without generating (a
// stratagen that cannot run would fail it), and --no-generate still
// refuses, naming the command.
func TestGenerateIntoCache(t *testing.T) {
	exe := stratagenExe(t)
	cache := t.TempDir()
	var notes []string
	opt := Options{GenerateCommand: exe, ArtifactCache: cache, History: "-", Context: 512, PrefillRows: 8,
		GenerateNote: func(s string) { notes = append(notes, s) }}
	l, err := HF(tinyAOracle, opt)
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	key := l.Artifact.Key
	if want := filepath.Join(cache, key); l.ArtifactFrom != want {
		t.Errorf("artifact from %q, want the cache folder %q", l.ArtifactFrom, want)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "generated the artifact of tiny-a (context 512, prefill rows 8) in ") || !strings.Contains(notes[0], exe) {
		t.Errorf("notes %q, want one saying stratagen generated the artifact", notes)
	}
	if got := cacheEntries(t, cache); len(got) != 1 || got[0] != key {
		t.Errorf("cache holds %q, want only %s", got, key)
	}

	notes = nil
	opt.GenerateCommand = filepath.Join(t.TempDir(), "no-stratagen")
	l, err = HF(tinyAOracle, opt)
	if err != nil {
		t.Fatalf("second load: %v", err)
	}
	l.Close()
	if l.ArtifactFrom != filepath.Join(cache, key) || len(notes) != 0 {
		t.Errorf("second load: artifact from %q, notes %q; want the cache and no generation", l.ArtifactFrom, notes)
	}

	opt.NoGenerate, opt.GenerateCommand, opt.Context = true, exe, 256
	_, err = HF(tinyAOracle, opt)
	if err == nil || !strings.Contains(err.Error(), "run  stratagen generate --hf "+tinyAOracle+" --context 256 --prefill-rows 8") {
		t.Errorf("--no-generate: err %v, want the refusal naming the command", err)
	}
}

// A GGUF file strata has never seen runs at once, its artifact generated
// into the cache (the case of strata serve --gguf on a new download).
func TestGenerateIntoCacheGGUF(t *testing.T) {
	exe := stratagenExe(t)
	data, err := os.ReadFile(filepath.Join(tinyAOracle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	c, err := arch.ImportHF(data, models.ImportOptions{Name: "tiny-a"})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.OpenDir(tinyAOracle)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	path := filepath.Join(t.TempDir(), "tiny-a.gguf")
	if _, err := convert.Write(path, c, weights.NewHF(ck, c), convert.Options{}); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	l, err := GGUF(path, GGUFOptions{Options: Options{GenerateCommand: exe, ArtifactCache: cache, History: "-"}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.ArtifactFrom != filepath.Join(cache, l.Artifact.Key) {
		t.Errorf("artifact from %q, want the cache", l.ArtifactFrom)
	}
	if _, err := os.Stat(artifact.DirFor(true, path)); err == nil {
		t.Errorf("an artifact was written beside the GGUF; want it in the cache only")
	}
}

// Two strata starting together on a model without an artifact both load
// it, and the cache ends with the one folder (no private folder left).
func TestGenerateIntoCacheConcurrent(t *testing.T) {
	exe := stratagenExe(t)
	cache := t.TempDir()
	var wg sync.WaitGroup
	froms := make([]string, 3)
	errs := make([]error, len(froms))
	for i := range froms {
		wg.Go(func() {
			l, err := HF(tinyAOracle, Options{GenerateCommand: exe, ArtifactCache: cache, History: "-", PrefillRows: 4})
			if errs[i] = err; err == nil {
				froms[i] = l.ArtifactFrom
				l.Close()
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
		if froms[i] != froms[0] {
			t.Errorf("start %d loaded %s, start 0 %s", i, froms[i], froms[0])
		}
	}
	if got := cacheEntries(t, cache); len(got) != 1 || filepath.Join(cache, got[0]) != froms[0] {
		t.Errorf("cache holds %q, want only %s", got, froms[0])
	}
}

// A stratagen that fails, or one from another build (whose key differs),
// is an error naming it; nothing is left in the cache.
func TestGenerateIntoCacheFails(t *testing.T) {
	dir := t.TempDir()
	failing := filepath.Join(dir, "failing")
	other := filepath.Join(dir, "other-build")
	// other-build writes a valid artifact of another config (the default
	// context) wherever --out points.
	exe := stratagenExe(t)
	scripts := map[string]string{
		failing: "#!/bin/sh\necho 'stratagen: model: boom' >&2\nexit 3\n",
		other:   "#!/bin/sh\nwhile [ \"$1\" != --out ]; do shift; done\nexec " + exe + " generate --hf " + tinyAOracle + " --out \"$2\"\n",
	}
	for name, body := range scripts {
		if err := os.WriteFile(name, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ exe, want string }{
		{failing, "exit status 3\nstratagen: model: boom"},
		{other, "strata and stratagen are from different builds"},
	} {
		cache := t.TempDir()
		_, err := HF(tinyAOracle, Options{GenerateCommand: c.exe, ArtifactCache: cache, History: "-", Context: 128})
		if err == nil || !strings.Contains(err.Error(), "generating the artifact of tiny-a") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want one containing %q", filepath.Base(c.exe), err, c.want)
		}
		if got := cacheEntries(t, cache); len(got) != 0 {
			t.Errorf("%s: cache holds %q, want nothing", filepath.Base(c.exe), got)
		}
	}
}

// Without a cache named, the cache is strata/artifacts under
// $XDG_CACHE_HOME; a test binary otherwise stays off it and off PATH.
func TestArtifactCacheDefault(t *testing.T) {
	if _, err := artifactCache(Options{}); err == nil {
		t.Errorf("a test binary found the user's artifact cache; want none unless named")
	}
	defer func(h bool) { hermetic = h }(hermetic)
	hermetic = false
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	t.Setenv("HOME", t.TempDir())
	got, err := artifactCache(Options{})
	want := filepath.Join(xdg, "strata", "artifacts")
	if runtime.GOOS != "linux" { // ~/Library/Caches, %LocalAppData%
		want = got[:max(len(got)-len(want)+len(xdg), 0)] + want[len(xdg):]
	}
	if err != nil || got != want {
		t.Errorf("cache %q, %v; want %s", got, err, want)
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := stratagen(Options{}); err == nil || !strings.Contains(err.Error(), "go install ./cmd/...") {
		t.Errorf("no stratagen anywhere: err %v, want the install hint", err)
	}
}
