package load

import (
	"sync"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/models"
)

// The tests open models under configs no checked-in artifact is for (their
// own prefill rows, contexts, MoCE knobs, GGUF formats): Generate makes
// those in process, through the serialization path.
func init() { Generate = GenerateLoaded }

var generated struct {
	sync.Mutex
	byKey map[string]*artifact.Artifact
}

// GenerateLoaded generates the artifact of c, encodes it into an in-memory
// folder and loads it back (so every test exercises Write's bytes and
// Load), once per key.
func GenerateLoaded(c *models.Config) (*artifact.Artifact, error) {
	key, err := artifact.KeyOf(c)
	if err != nil {
		return nil, err
	}
	generated.Lock()
	defer generated.Unlock()
	if a, ok := generated.byKey[key]; ok {
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
	if generated.byKey == nil {
		generated.byKey = map[string]*artifact.Artifact{}
	}
	generated.byKey[key] = a
	return a, nil
}
