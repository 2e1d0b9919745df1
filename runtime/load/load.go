// Package load opens a model for the engine: an HF checkpoint directory, a
// GGUF file or the embedded default (tiny-go). It resolves the exact config
// the run asks for (package resolve), finds the generated artifact made for
// it by its content key (compiled in, beside the model, or in --artifacts
// folders; artifacts.go), takes its window graphs and kernels, picks a
// backend and loads the weights. It never imports the generator.
package load

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend/cuda"
	"github.com/strata-llm/strata/runtime/backend/metal"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/format/safetensors"
	"github.com/strata-llm/strata/runtime/resolve"
	"github.com/strata-llm/strata/runtime/weights"
)

// The embedded models: tiny-go, the default of `strata run` (Go source
// continued as text), and tiny-go-chat, tiny-go fine-tuned to chat and call
// tools, the default of `strata serve` and `strata run --chat`. They share
// a config (and so the compiled-in artifact) and a tokenizer.
const (
	TinyGo     = "tiny-go"
	TinyGoChat = "tiny-go-chat"
)

const defaultModelName = TinyGo

// DefaultModelFiles are the files of the default model's directory.
var DefaultModelFiles = []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}

// DefaultPrompt is the prompt `strata run` feeds the default model when no
// tokens are given: the 16 tokens of tiny-go's greedy reference prompt, the
// Go snippet "func (o *Once) doSlow(f func()) {\n\to.m.Lock" (from go/sync/once.go).
var DefaultPrompt = []int{355, 329, 87, 341, 5756, 17, 694, 59, 787, 525, 871, 2907, 287, 1691, 868, 4068}

// Options tune how an HF checkpoint is opened.
type Options struct {
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
	// WaitEveryLayer stops the GPU for the host at every MoE layer of a
	// streamed model even where the backend's GPU can check residency
	// itself (engine.Streaming.EveryLayer).
	WaitEveryLayer bool
	// WindowMajor prefills a prompt of several windows window by window
	// with an expert arena, instead of layer by layer (engine.Streaming).
	WindowMajor bool
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
	// each kernel of the cpu backend the model gets splits its work into
	// (cpu.New).
	Threads int
	// CUDA tunes the cuda backend (streams, schedule, CUDA-graph replay).
	CUDA cuda.Options
	// Artifacts are folders to look in for the model's generated artifact
	// (--artifacts): each an artifact folder or a folder of them. The
	// compiled-in artifacts and the one beside the model are looked at too.
	Artifacts []string
	// Where no artifact serves the model, the stratagen executable
	// GenerateCommand ("": the one beside strata's, else on PATH) generates
	// one into ArtifactCache/<key> ("": strata/artifacts in the user cache
	// folder, os.UserCacheDir), where the next load finds it; GenerateNote
	// (else Note) hears how long that took. NoGenerate keeps the refusal
	// that names the command instead (--no-generate).
	NoGenerate      bool
	GenerateCommand string
	ArtifactCache   string
	GenerateNote    func(string)
	// Generate, when set, makes the artifact of a config for which none is
	// found exactly (after the folders and the compiled-in ones). Only
	// programs that link the generator set it (the tests, through
	// gentest.Generate); strata never does, and says which command to run
	// instead.
	Generate func(*models.Config) (*artifact.Artifact, error)
}

// resolveOptions are the options that change the graphs.
func (opt Options) resolveOptions() resolve.Options {
	return resolve.Options{Context: opt.Context, PrefillRows: opt.PrefillRows, MoCE: opt.MoCE, ReadAhead: opt.ReadAhead,
		MoCEMaxRank: opt.MoCEMaxRank, MoCELambda: opt.MoCELambda}
}

// Loaded is a model ready to run, with what it was built from.
type Loaded struct {
	Config      *models.Config
	Model       *engine.Model
	PrefillRows int
	// ArenaExperts is the expert arena's size in slots (0: every expert
	// resident), however it was asked for.
	ArenaExperts int
	// Artifact is the generated artifact the model runs, and ArtifactFrom
	// where it was found (FromCompiledIn, a folder, FromGenerate).
	Artifact     *artifact.Artifact
	ArtifactFrom string
	// Threads is the cpu kernels' thread count the model was loaded with
	// (the cpu backend's, when it runs on one).
	Threads    int
	checkpoint *safetensors.Checkpoint
	closers    []func() error // files a streaming model keeps reading
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

// loadEngine loads the graphs of artifact a into the engine: every expert
// resident, or streamed through an arena when opt asks for one (reading
// through reader, or the weight source when reader is nil).
func loadEngine(c *models.Config, a *artifact.Artifact, graphs []*graph.Graph, src engine.WeightSource, opt Options, reader stream.Reader) (*engine.Model, error) {
	backend, err := opt.backend(a, cpuThreads(c, opt))
	if err != nil {
		return nil, err
	}
	if opt.CopyWeights {
		src = engine.Copying(src)
	}
	if opt.ArenaExperts <= 0 {
		return engine.LoadWith(c, graphs, src, backend)
	}
	return engine.LoadStreaming(c, graphs, src, backend, engine.Streaming{Slots: opt.ArenaExperts, Reader: reader, Options: opt.Stream, Wrap: opt.WrapReader,
		History: opt.History, Warn: opt.Warn, EveryLayer: opt.WaitEveryLayer, WindowMajor: opt.WindowMajor})
}

// cpuThreads is how many chunks the cpu backend's kernels split their
// work into: opt.Threads, else the config's runtime.threads, else one per
// core.
func cpuThreads(c *models.Config, opt Options) int {
	n := c.Runtime.Threads
	if opt.Threads > 0 {
		n = opt.Threads
	}
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	return n
}

// OpenHF opens an HF checkpoint directory (config.json + safetensors): imports
// the config, checks every tensor, finds the artifact generated for it and
// loads its graphs and the weights.
func HF(dir string, opt Options) (*Loaded, error) {
	return openHF(dir, modelFile{flag: "--hf", path: dir, beside: artifact.DirFor(false, dir)}, opt)
}

func openHF(dir string, mf modelFile, opt Options) (*Loaded, error) {
	c, err := resolve.HF(dir, opt.resolveOptions())
	if err != nil {
		return nil, err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	l, err := load(c, ck, mf, opt)
	if err != nil {
		ck.Close()
		return nil, err
	}
	return l, nil
}

func load(c *models.Config, ck *safetensors.Checkpoint, mf modelFile, opt Options) (*Loaded, error) {
	src := weights.NewHF(ck, c)
	if err := src.Check(c.Tensors()); err != nil {
		return nil, err
	}
	want := c.Runtime.ContextLength // an artifact made for a longer context may serve; the run keeps this limit
	a, from, c, err := findArtifact(c, mf, opt)
	if err != nil {
		return nil, err
	}
	c, graphs, rows, opt, err := windowsFor(c, a, opt)
	if err != nil {
		return nil, err
	}
	m, err := loadEngine(c, a, graphs, src, opt, nil)
	if err != nil {
		return nil, err
	}
	if err := m.LimitContext(want); err != nil {
		m.Close()
		return nil, err
	}
	return &Loaded{Config: c, Model: m, PrefillRows: rows, ArenaExperts: opt.ArenaExperts, Artifact: a, ArtifactFrom: from,
		Threads: cpuThreads(c, opt), checkpoint: ck}, nil
}

// Default opens the embedded default model, tiny-go, with its compiled-in
// artifact.
func Default(opt Options) (*Loaded, error) { return Embedded(TinyGo, opt) }

// Embedded opens an embedded model (TinyGo or TinyGoChat) with the
// compiled-in artifact. The checkpoint is decoded out of the binary into a
// temporary directory named after the model, since the safetensors reader
// maps files; the directory is removed again before Embedded returns (the
// mapping stays valid).
func Embedded(model string, opt Options) (*Loaded, error) {
	if model != TinyGo && model != TinyGoChat {
		return nil, fmt.Errorf("no embedded model %q (there are %s and %s)", model, TinyGo, TinyGoChat)
	}
	tmp, err := os.MkdirTemp("", "strata-default-")
	if err != nil {
		return nil, fmt.Errorf("unpacking the default model: %w", err)
	}
	defer os.RemoveAll(tmp)
	dir := filepath.Join(tmp, model)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("unpacking the default model: %w", err)
	}
	for _, name := range DefaultModelFiles {
		if name == "model.safetensors" {
			// The decoded checkpoint in the cache, linked: later starts neither
			// decode nor copy it (planes.Cached).
			if p, err := cachedCheckpoint(model); err != nil {
				return nil, fmt.Errorf("unpacking the default model: %w", err)
			} else if p != "" && os.Symlink(p, filepath.Join(dir, name)) == nil {
				continue
			}
		}
		b, err := EmbeddedFile(model, name)
		if err != nil {
			return nil, fmt.Errorf("unpacking the default model: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return nil, fmt.Errorf("unpacking the default model: %w", err)
		}
	}
	return openHF(dir, modelFile{flag: "--hf", path: dir, isDefault: true}, opt)
}
