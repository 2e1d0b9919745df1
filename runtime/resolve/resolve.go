// Package resolve turns a model file and the options a run asks for into
// the exact config its window graphs are generated for: the HF config.json
// imported, or a GGUF's embedded config (or its qwen3next metadata) with the
// formats its tensors really hold, then the context, the prefill rows and
// the MoCE router's knobs applied. The runtime opens models through it and
// stratagen generates their artifacts through it, so the two agree on the
// artifact's key.
package resolve

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/weights"
)

// Options are what a run asks for that changes the graphs.
type Options struct {
	Context     int // 0: the config's runtime.context_length (HF: min(max_position_embeddings, 32768))
	PrefillRows int // 0: the config's windows.prefill_rows
	// MoCE turns on cache-aware routing (with the config's knobs, or the
	// defaults) and ReadAhead the next-layer expert prediction.
	MoCE, ReadAhead bool
	// MoCEMaxRank overrides the max-rank cap (> 0), or lifts it (< 0);
	// MoCELambda > 0 overrides λ, the score margin a resident expert may
	// win by.
	MoCEMaxRank int
	MoCELambda  float64
}

// HF is the config of the HF checkpoint directory dir (its config.json,
// named after the directory) under opt.
func HF(dir string, opt Options) (*models.Config, error) {
	cfgPath := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("reading the HF config: %w", err)
	}
	return HFConfig(filepath.Base(dir), cfgPath, data, opt)
}

// HFConfig is HF for a config.json already read (from cfgPath, named name).
func HFConfig(name, cfgPath string, configJSON []byte, opt Options) (*models.Config, error) {
	c, err := arch.ImportHF(configJSON, models.ImportOptions{Name: name, Source: cfgPath, ContextLength: opt.Context})
	if err != nil {
		return nil, err
	}
	if err := CheckContext(c, opt.Context); err != nil {
		return nil, err
	}
	return Apply(c, opt)
}

// GGUF is the config of the GGUF file f under opt, and its weight source:
// base, or the config strata embeds in the file (strata.config), or in a
// file without one (llama.cpp's) the one its qwen3next metadata gives; its
// quant plan replaced by the formats the file's tensors hold, so every role
// runs as it is stored.
func GGUF(f *gguf.File, base *models.Config, opt Options) (*models.Config, *weights.GGUF, error) {
	c := base
	if c == nil {
		var err error
		if c, err = configOf(f); err != nil {
			return nil, nil, err
		}
	}
	if err := CheckContext(c, opt.Context); err != nil {
		return nil, nil, err
	}
	if opt.Context > 0 {
		cc := *c
		cc.Runtime.ContextLength = opt.Context
		c = &cc
	}
	src, err := weights.NewGGUF(f, c)
	if err != nil {
		return nil, nil, err
	}
	if c, err = src.WithFileFormats(c); err != nil {
		return nil, nil, err
	}
	if c, err = Apply(c, opt); err != nil {
		return nil, nil, err
	}
	return c, src, nil
}

// configOf is the config strata embeds in the file, or, in a file without
// one (llama.cpp's), the one its architecture's metadata gives.
func configOf(f *gguf.File) (*models.Config, error) {
	if _, ok := f.Value(gguf.KeyConfig); ok {
		return weights.ConfigOf(f)
	}
	return arch.ConfigOf(f)
}

// CheckContext bounds an asked-for context by the model's positions (past
// max_position_embeddings the model was never trained; the machine's memory
// is checked when the buffers are sized, in the engine).
func CheckContext(c *models.Config, asked int) error {
	if limit := c.Architecture.Attention.MaxPositions; asked > 0 && limit > 0 && asked > limit {
		return fmt.Errorf("--context %d: model %s has %d positions (max_position_embeddings); expected at most that", asked, c.Name, limit)
	}
	return nil
}

// Apply returns c (a copy when anything changes) with opt's prefill rows
// and routing switches.
func Apply(c *models.Config, opt Options) (*models.Config, error) {
	if opt.PrefillRows < 0 {
		return nil, fmt.Errorf("--prefill-rows must be ≥ 1, got %d", opt.PrefillRows)
	}
	if opt.PrefillRows > 0 && opt.PrefillRows != c.Windows.PrefillRows {
		cc := *c
		cc.Windows.PrefillRows = opt.PrefillRows
		c = &cc
	}
	if c.Windows.PrefillRows < 1 {
		return nil, fmt.Errorf("model %s: windows.prefill_rows must be ≥ 1, got %d", c.Name, c.Windows.PrefillRows)
	}
	return withRouting(c, opt), nil
}

// withRouting applies the MoCE and read-ahead switches to a copy of c.
func withRouting(c *models.Config, opt Options) *models.Config {
	if !opt.MoCE && !opt.ReadAhead {
		return c
	}
	cc := *c
	cc.Runtime.MoCE = cc.Runtime.MoCE || opt.MoCE
	cc.Runtime.ReadAhead = cc.Runtime.ReadAhead || opt.ReadAhead
	if cc.Runtime.MoCE {
		switch {
		case opt.MoCEMaxRank > 0:
			cc.Runtime.MoCEMaxRank = opt.MoCEMaxRank
		case opt.MoCEMaxRank < 0:
			cc.Runtime.MoCEMaxRank = cc.Architecture.MoE.NumExperts // every rank may be substituted
		}
		if opt.MoCELambda > 0 {
			cc.Runtime.MoCELambda = opt.MoCELambda
		}
		cc.Runtime.MoCEDefaults()
	}
	return &cc
}
