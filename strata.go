// Package strata ties the pieces together for the CLIs and the end-to-end
// tests: it opens an HF checkpoint directory, builds its window graphs and
// loads it into the engine. It also embeds the default model (tiny-go, a
// small trained qwen4_exp model) so `strata run` works on a fresh clone with
// no download.
package strata

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/cpu"
	"github.com/strata-llm/strata/runtime/cuda"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/metal"
	"github.com/strata-llm/strata/runtime/mslemu"
	"github.com/strata-llm/strata/runtime/safetensors"
	"github.com/strata-llm/strata/runtime/stream"
	"github.com/strata-llm/strata/runtime/weights"
)

// DefaultModel is the embedded HF checkpoint `strata run` uses when no model is
// given: tiny-go (testdata/tiny-go/README.md), an 11.9M-parameter
// Qwen3.8-Flash-Next-architecture model trained on Go source and fortunes,
// with its MTP head and tokenizer.
//
//go:embed testdata/tiny-go/config.json testdata/tiny-go/generation_config.json testdata/tiny-go/model.safetensors testdata/tiny-go/tokenizer.json testdata/tiny-go/tokenizer_config.json
var defaultModel embed.FS

const (
	defaultModelDir  = "testdata/tiny-go"
	defaultModelName = "tiny-go"
)

// DefaultModelFiles are the files of the default model's directory.
var DefaultModelFiles = []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}

// DefaultPrompt is the prompt `strata run` feeds the default model when no
// tokens are given: the 16 tokens of tiny-go's greedy reference prompt, the
// Go snippet "func (o *Once) doSlow(f func()) {\n\to.m.Lock" (from go/sync/once.go).
var DefaultPrompt = []int{355, 329, 87, 341, 5756, 17, 694, 59, 787, 525, 871, 2907, 287, 1691, 868, 4068}

// HFOptions tune how an HF checkpoint is opened.
type HFOptions struct {
	PrefillRows int  // 0: the model config's windows.prefill_rows
	AllLogits   bool // compute every row's logits in prefill windows too (for --dump-logits)
	Context     int  // 0: the imported default
	// ArenaExperts > 0 streams the routed experts through an arena of that
	// many experts instead of loading them all (the tokens do not change).
	ArenaExperts int
	// ArenaGB > 0 sizes the arena in GB (10⁹ bytes) instead; AutoArena
	// sizes it from the machine's available memory less the other buffers
	// and a margin (all experts stay resident when they fit). Note, when
	// set, hears how the experts are held, once, at load.
	ArenaGB   float64
	AutoArena bool
	Note      func(string)
	// Stream tunes the streamer's reader pool (with ArenaExperts).
	Stream stream.Options
	// WrapReader wraps the expert reader (delay or fault injection).
	WrapReader func(stream.Reader) stream.Reader
	// History is the expert usage-history file ("" none; GGUF models with a
	// pack default to PACK.usage).
	History string
	// Warn reports problems that do not stop the run (an unusable history).
	Warn func(error)
	// MoCE turns on cache-aware routing (with the config's knobs, or the
	// defaults) and ReadAhead the next-layer expert prediction.
	MoCE, ReadAhead bool
	// MoCEMaxRank overrides the max-rank cap (> 0), or lifts it (< 0);
	// MoCELambda > 0 overrides λ, the score margin a resident expert may
	// win by.
	MoCEMaxRank int
	MoCELambda  float64
	// Backend runs the window graphs: BackendCPU ("" too), BackendMSLEmu
	// (the generated MSL on the CPU, tuned by MSLEmu), BackendMetal (the
	// GPU) or BackendMetalEmu (the Metal backend's encoding run by the
	// emulator); see mslemu.go.
	Backend string
	MSLEmu  mslemu.Options
	// CopyWeights copies every weight into the engine's buffers even where
	// the backend could use a GGUF's mapped tensors in place.
	CopyWeights bool
	// Metal tunes the metal backends (ICB replay, keep-alive, guards).
	Metal metal.Options
	// Threads overrides the config's runtime.threads (> 0): the goroutines
	// each cpu kernel splits its work into (see cpu.SetThreads).
	Threads int
	// CUDA tunes the cuda backend (streams, schedule, CUDA-graph replay).
	CUDA cuda.Options
}

// Loaded is a model ready to run, with what it was built from.
type Loaded struct {
	Config      *models.Config
	Model       *engine.Model
	PrefillRows int
	// ArenaExperts is the expert arena's size in slots (0: every expert
	// resident), however it was asked for.
	ArenaExperts int
	checkpoint   *safetensors.Checkpoint
	closers      []func() error // files a streaming model keeps reading
}

// Close stops streaming and releases the checkpoint mapping and files.
func (l *Loaded) Close() error {
	errs := []error{l.Model.Close()}
	for _, c := range l.closers {
		errs = append(errs, c())
	}
	if l.checkpoint != nil {
		errs = append(errs, l.checkpoint.Close())
	}
	return errors.Join(errs...)
}

// withRouting applies the MoCE and read-ahead switches to a copy of c.
func withRouting(c *models.Config, opt HFOptions) *models.Config {
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

// loadEngine loads graphs into the engine: every expert resident, or streamed
// through an arena when opt asks for one (reading through reader, or the
// weight source when reader is nil).
func loadEngine(c *models.Config, graphs []*graph.Graph, src engine.WeightSource, opt HFOptions, reader stream.Reader) (*engine.Model, error) {
	backend, err := opt.backend(c, graphs)
	if err != nil {
		return nil, err
	}
	if opt.CopyWeights {
		src = engine.Copying(src)
	}
	threads := c.Runtime.Threads // the cpu kernels' thread count (0: one per core)
	if opt.Threads > 0 {
		threads = opt.Threads
	}
	cpu.SetThreads(threads)
	if opt.ArenaExperts <= 0 {
		return engine.LoadWith(c, graphs, src, backend)
	}
	return engine.LoadStreaming(c, graphs, src, backend, engine.Streaming{Slots: opt.ArenaExperts, Reader: reader, Options: opt.Stream, Wrap: opt.WrapReader,
		History: opt.History, Warn: opt.Warn})
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
	if err := checkContext(c, opt.Context); err != nil {
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
	c = withRouting(c, opt)
	c, graphs, rows, opt, err := windowsFor(c, opt, rows)
	if err != nil {
		return nil, err
	}
	m, err := loadEngine(c, graphs, src, opt, nil)
	if err != nil {
		return nil, err
	}
	return &Loaded{Config: c, Model: m, PrefillRows: rows, ArenaExperts: opt.ArenaExperts, checkpoint: ck}, nil
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
	dir := filepath.Join(tmp, defaultModelName)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("unpacking the default model: %w", err)
	}
	for _, name := range DefaultModelFiles {
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
