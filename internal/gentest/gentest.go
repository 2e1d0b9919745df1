// Package gentest is for tests only: it generates a config's artifact in
// process and loads it back through its on-disk bytes, so tests can open
// models under configs no checked-in artifact is for (their own prefill
// rows, contexts, MoCE knobs, converted GGUFs) while exercising the same
// Encode/Load path as an artifact folder. Tests pass Generate as
// runtime/load's Options.Generate.
//
// Generating is most of some tests' time, and every test package of a
// `go test ./...` run asks for the same few configs, so each artifact is
// generated once and kept on disk (cache.go): in a folder named by the
// config's content key under one named by a hash of the generator's
// sources, so a generator change never serves a stale artifact.
package gentest

import (
	"sync"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/models"
)

var memo struct {
	sync.Mutex
	byKey map[string]*entry
}

type entry struct {
	once sync.Once
	a    *artifact.Artifact
	err  error
}

// Generate returns the artifact of c, loaded from its encoded files: from
// the disk cache when an earlier test process (or package) generated it
// with the same generator sources, else generated now and stored there.
// Within a process each key is generated or read once.
func Generate(c *models.Config) (*artifact.Artifact, error) {
	key, err := artifact.KeyOf(c)
	if err != nil {
		return nil, err
	}
	memo.Lock()
	if memo.byKey == nil {
		memo.byKey = map[string]*entry{}
	}
	e := memo.byKey[key]
	if e == nil {
		e = &entry{}
		memo.byKey[key] = e
	}
	memo.Unlock()
	e.once.Do(func() { e.a, e.err = cached(key, c) })
	return e.a, e.err
}

// generate makes the artifact of c and encodes it.
func generate(c *models.Config) (map[string][]byte, error) {
	a, err := gen.Generate(c)
	if err != nil {
		return nil, err
	}
	return a.Encode()
}

// loadFiles loads an artifact from its encoded files, as from a folder.
func loadFiles(files map[string][]byte) (*artifact.Artifact, error) {
	return artifact.Load(artifact.MapFS(files))
}
