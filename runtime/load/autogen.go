package load

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/models"
)

// The runtime never links the generator: where no artifact serves a model,
// it runs the stratagen executable into a cache folder keyed by the
// artifact's content key, once, and loads what it wrote. The cache is one
// more folder findArtifact looks in, so the next start finds it there.

// StratagenName is the generator's executable, beside strata's or on PATH.
const StratagenName = "stratagen"

// hermetic keeps a test binary off the user's cache and any stratagen on
// PATH: it generates only where a test names the cache and the command.
var hermetic = testing.Testing()

// artifactCache is the folder of cached artifacts: opt.ArtifactCache, else
// strata/artifacts in the user's cache folder ($XDG_CACHE_HOME, ~/.cache,
// ~/Library/Caches).
func artifactCache(opt Options) (string, error) {
	if opt.ArtifactCache != "" {
		return opt.ArtifactCache, nil
	}
	if hermetic {
		return "", cannotGeneratef("a test binary uses no artifact cache unless Options.ArtifactCache names one")
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", cannotGeneratef("strata generates a missing artifact into the user cache folder, and has none: %v", err)
	}
	return filepath.Join(dir, "strata", "artifacts"), nil
}

// cachedArtifactDir is where the artifact of key lies in the cache ("" when
// there is no cache folder).
func cachedArtifactDir(key string, opt Options) string {
	dir, err := artifactCache(opt)
	if err != nil {
		return ""
	}
	return filepath.Join(dir, key)
}

// stratagen finds the generator: opt.GenerateCommand, else stratagen in
// strata's own folder (go install puts both there), else on PATH.
func stratagen(opt Options) (string, error) {
	if opt.GenerateCommand != "" {
		return opt.GenerateCommand, nil
	}
	if hermetic {
		return "", cannotGeneratef("a test binary runs stratagen only where Options.GenerateCommand names it")
	}
	name := StratagenName
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	self, selfErr := os.Executable()
	if selfErr == nil {
		beside := filepath.Join(filepath.Dir(self), name)
		if fi, err := os.Stat(beside); err == nil && !fi.IsDir() {
			return beside, nil
		}
	}
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	where := "on PATH"
	if selfErr == nil {
		where = "beside " + self + " or on PATH"
	}
	how := "go install ./cmd/... installs strata and stratagen together"
	if selfErr == nil && strings.Contains(self, "go-build") {
		how = "under go run, run the command above; " + how
	}
	return "", cannotGeneratef("strata generates a missing artifact itself with %s, but finds none %s: %s", name, where, how)
}

// cannotGenerate is what keeps strata from generating a missing artifact
// itself (no stratagen, no cache folder): the refusal then stands, with the
// reason.
type cannotGenerate struct{ reason string }

func (e *cannotGenerate) Error() string { return e.reason }

func cannotGeneratef(format string, args ...any) error {
	return &cannotGenerate{fmt.Sprintf(format, args...)}
}

// generateMissing is the last step of findArtifact, where no artifact
// serves c (key): unless opt.NoGenerate, stratagen generates one into the
// cache; otherwise, or without a stratagen, the error names the command to
// run.
func generateMissing(c *models.Config, key string, mf modelFile, opt Options, seen []string) (*artifact.Artifact, string, *models.Config, error) {
	if opt.NoGenerate {
		return nil, "", nil, noArtifact(c, key, mf, opt, seen)
	}
	a, dir, err := generateIntoCache(c, key, mf, opt)
	if cg := (*cannotGenerate)(nil); errors.As(err, &cg) {
		return nil, "", nil, fmt.Errorf("%w\n(%v)", noArtifact(c, key, mf, opt, seen), cg)
	}
	if err != nil {
		return nil, "", nil, err
	}
	return a, dir, c, nil
}

// generateIntoCache runs stratagen for the model mf opened with opt, whose
// config c has key, into the cache, and returns the artifact and its
// folder. stratagen writes into a private folder which is then renamed into
// place, so two strata starting together both end with the one artifact:
// whoever renames second finds the folder there and uses it.
func generateIntoCache(c *models.Config, key string, mf modelFile, opt Options) (*artifact.Artifact, string, error) {
	cache, err := artifactCache(opt)
	if err != nil {
		return nil, "", err
	}
	exe, err := stratagen(opt)
	if err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, "", fmt.Errorf("generating the artifact of %s: %w", c.Name, err)
	}
	removeStale(cache)
	tmp, err := os.MkdirTemp(cache, "."+artifact.ShortKey(key)+tmpMark)
	if err != nil {
		return nil, "", fmt.Errorf("generating the artifact of %s: %w", c.Name, err)
	}
	defer os.RemoveAll(tmp)
	out := filepath.Join(tmp, "artifact")
	args := append(generateArgs(mf, opt, mf.path), "--out", out)
	start := time.Now()
	cmd := exec.Command(exe, args...)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return nil, "", fmt.Errorf("generating the artifact of %s: %s %s: %w\n%s", c.Name, exe, strings.Join(args, " "), err, strings.TrimSpace(output.String()))
	}
	took := time.Since(start)
	a, err := artifact.Load(os.DirFS(out))
	if err != nil {
		return nil, "", fmt.Errorf("generating the artifact of %s: %s wrote %s: %w", c.Name, exe, out, err)
	}
	if a.Key != key {
		return nil, "", fmt.Errorf("generating the artifact of %s: %s made one with key %s, strata expects %s: strata and stratagen are from different builds (go install ./cmd/... installs both)",
			c.Name, exe, artifact.ShortKey(a.Key), artifact.ShortKey(key))
	}
	dir := filepath.Join(cache, key)
	if err := os.Rename(out, dir); err != nil {
		// Another strata put it there first: use its folder.
		if _, statErr := os.Stat(filepath.Join(dir, artifact.ManifestFile)); statErr != nil {
			return nil, "", fmt.Errorf("generating the artifact of %s: %w", c.Name, err)
		}
	}
	if a, err = artifact.Load(os.DirFS(dir)); err != nil {
		return nil, "", fmt.Errorf("generating the artifact of %s: %w", c.Name, err)
	}
	note := opt.GenerateNote
	if note == nil {
		note = opt.Note
	}
	if note != nil {
		note(fmt.Sprintf("generated the artifact of %s (%s) in %.1f s with %s, cached in %s",
			c.Name, describe(c), took.Seconds(), exe, dir))
	}
	return a, dir, nil
}

// tmpMark names the private folders stratagen writes into.
const tmpMark = ".generating-"

// removeStale removes private folders a killed strata left in the cache a
// day or more ago (younger ones may belong to a strata still generating).
func removeStale(cache string) {
	entries, err := os.ReadDir(cache)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), ".") || !strings.Contains(e.Name(), tmpMark) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > 24*time.Hour {
			_ = os.RemoveAll(filepath.Join(cache, e.Name()))
		}
	}
}
