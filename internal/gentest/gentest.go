// Package gentest is for tests only: it generates a config's artifact in
// process and loads it back through its on-disk bytes, so tests can open
// models under configs no checked-in artifact is for (their own prefill
// rows, contexts, MoCE knobs, converted GGUFs) while exercising the same
// Encode/Load path as an artifact folder. Tests set runtime/load's
// Generate hook to Generate.
package gentest

import (
	"sync"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/models"
)

var cache struct {
	sync.Mutex
	byKey map[string]*artifact.Artifact
}

// Generate generates the artifact of c, encodes it into an in-memory folder
// and loads it back, once per key.
func Generate(c *models.Config) (*artifact.Artifact, error) {
	key, err := artifact.KeyOf(c)
	if err != nil {
		return nil, err
	}
	cache.Lock()
	defer cache.Unlock()
	if a, ok := cache.byKey[key]; ok {
		return a, nil
	}
	a, err := gen.Generate(c)
	if err != nil {
		return nil, err
	}
	files, err := a.Encode()
	if err != nil {
		return nil, err
	}
	if a, err = artifact.Load(artifact.MapFS(files)); err != nil {
		return nil, err
	}
	if cache.byKey == nil {
		cache.byKey = map[string]*artifact.Artifact{}
	}
	cache.byKey[key] = a
	return a, nil
}
