package artifact

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/strata-llm/strata/models"
)

//go:generate go run digest_gen.go

// Schema is the version of the artifact format and of what the key covers;
// a change that makes old artifacts unusable bumps it.
const Schema = 1

// keyed is everything a window graph or a kernel depends on, in a fixed
// order: the generator's source (its digest: an artifact an older strata
// cached is regenerated, not loaded by a runtime that expects other
// kernels or constants), the architecture (less the EOS ids, which only the host reads),
// every tensor's storage layout, the window shapes, the context length and
// the MoCE router's constants. The model's name is not in it: a copy of a
// checkpoint under another name runs the same graphs.
type keyed struct {
	Schema       int
	Generator    string
	Architecture models.Architecture
	Tensors      []string // name format stored-row-length
	Windows      models.Windows
	Context      int
	MoCE         bool
	MoCELambda   float64 `json:",omitempty"`
	MoCEProtect  int     `json:",omitempty"`
	MoCEMaxRank  int     `json:",omitempty"`
	// ReadAhead adds each MoE layer's prediction of the next layer's
	// experts to the graphs (omitted when off: keys made before it stand).
	ReadAhead bool `json:",omitempty"`
}

// KeyOf is the content key of the artifact that serves config c: a SHA-256
// of the canonical JSON of what the generator reads from c (keyed). Both the
// generator and the runtime compute it, so a model opened with a config
// finds the artifact made for exactly that config.
func KeyOf(c *models.Config) (string, error) {
	k := keyed{Schema: Schema, Generator: generatorDigest, Architecture: c.Architecture, Windows: c.Windows, Context: c.Runtime.ContextLength, MoCE: c.Runtime.MoCE, ReadAhead: c.Runtime.ReadAhead}
	k.Architecture.EOSTokenIDs = nil
	if c.Runtime.MoCE {
		k.MoCELambda, k.MoCEProtect, k.MoCEMaxRank = c.Runtime.MoCELambda, c.Runtime.MoCEProtect, c.Runtime.MoCEMaxRank
	}
	formats, err := FormatsOf(c)
	if err != nil {
		return "", err
	}
	for _, s := range c.Tensors() {
		rl, err := s.Layout(c.Quant)
		if err != nil {
			return "", fmt.Errorf("model %s: %w", c.Name, err)
		}
		k.Tensors = append(k.Tensors, fmt.Sprintf("%s %s %d", s.Name, formats[s.Name], rl.Stored))
	}
	b, err := json.Marshal(k)
	if err != nil {
		return "", fmt.Errorf("model %s: %w", c.Name, err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// FormatsOf is the storage format of every tensor of c, by role name.
func FormatsOf(c *models.Config) (map[string]string, error) {
	out := map[string]string{}
	for _, s := range c.Tensors() {
		rl, err := s.Layout(c.Quant)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", c.Name, err)
		}
		out[s.Name] = rl.Format.Name
	}
	return out, nil
}

// ShortKey is the key's first 12 digits, for messages.
func ShortKey(key string) string { return key[:min(len(key), 12)] }
