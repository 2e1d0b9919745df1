// Package strata ties the pieces together for the CLIs and the end-to-end
// tests: it opens an HF checkpoint directory, builds its window graphs and
// loads it into the engine. It also embeds the default model (the tiny-a
// oracle) so `strata run` works on a fresh clone with no download.
package strata

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/safetensors"
	"github.com/strata-llm/strata/runtime/weights"
)

// DefaultModel is the embedded HF checkpoint `strata run` uses when no model is
// given: the tiny-a oracle (Qwen3-Next math at hidden size 64).
//
//go:embed testdata/oracles/tiny-a/config.json testdata/oracles/tiny-a/model.safetensors
var defaultModel embed.FS

const defaultModelDir = "testdata/oracles/tiny-a"

// DefaultPrompt is the prompt `strata run` feeds the default model when no
// tokens are given: the first 16 tokens of the tiny-a reference.
var DefaultPrompt = []int{426, 50, 257, 220, 142, 108, 137, 389, 319, 31, 51, 81, 507, 366, 184, 255}

// HFOptions tune how an HF checkpoint is opened.
type HFOptions struct {
	PrefillRows int  // 0: the model config's windows.prefill_rows
	AllLogits   bool // compute every row's logits in prefill windows too (for --dump-logits)
	Context     int  // 0: the imported default
}

// Loaded is a model ready to run, with what it was built from.
type Loaded struct {
	Config      *models.Config
	Model       *engine.Model
	PrefillRows int
	checkpoint  *safetensors.Checkpoint
}

// Close releases the checkpoint mapping (a GGUF model holds none).
func (l *Loaded) Close() error {
	if l.checkpoint == nil {
		return nil
	}
	return l.checkpoint.Close()
}

// OpenHF opens an HF checkpoint directory (config.json + safetensors): imports
// the config, checks every tensor, builds the window graphs and loads weights.
func OpenHF(dir string, opt HFOptions) (*Loaded, error) {
	cfgPath := filepath.Join(dir, "config.json")
	data, err := os.ReadFile(cfgPath)
	if err != nil {
		return nil, fmt.Errorf("reading the HF config: %w", err)
	}
	return open(dir, cfgPath, data, opt)
}

func open(dir, cfgPath string, configJSON []byte, opt HFOptions) (*Loaded, error) {
	c, err := models.ImportHF(configJSON, models.ImportOptions{Name: filepath.Base(dir), Source: cfgPath, ContextLength: opt.Context})
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	l, err := load(c, ck, opt)
	if err != nil {
		ck.Close()
		return nil, err
	}
	return l, nil
}

func load(c *models.Config, ck *safetensors.Checkpoint, opt HFOptions) (*Loaded, error) {
	rows := opt.PrefillRows
	if rows == 0 {
		rows = c.Windows.PrefillRows
	}
	if rows < 1 {
		return nil, fmt.Errorf("--prefill-rows must be ≥ 1, got %d", rows)
	}
	src := weights.NewHF(ck, c)
	if err := src.Check(c.Tensors()); err != nil {
		return nil, err
	}
	graphs, err := gen.Windows(c, opt.AllLogits, rows)
	if err != nil {
		return nil, err
	}
	m, err := engine.Load(c, graphs, src)
	if err != nil {
		return nil, err
	}
	return &Loaded{Config: c, Model: m, PrefillRows: rows, checkpoint: ck}, nil
}

// OpenDefault opens the embedded default model. The checkpoint is copied out
// of the binary into a temporary directory, since the safetensors reader maps
// files; the directory is removed again before OpenDefault returns (the
// mapping stays valid).
func OpenDefault(opt HFOptions) (*Loaded, error) {
	tmp, err := os.MkdirTemp("", "strata-default-")
	if err != nil {
		return nil, fmt.Errorf("unpacking the default model: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, "tiny-a")
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("unpacking the default model: %w", err)
	}
	for _, name := range []string{"config.json", "model.safetensors"} {
		b, err := fs.ReadFile(defaultModel, defaultModelDir+"/"+name)
		if err != nil {
			return nil, fmt.Errorf("unpacking the default model: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, fmt.Errorf("unpacking the default model: %w", err)
		}
	}
	return OpenHF(dir, opt)
}
