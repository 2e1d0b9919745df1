package strata

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/gguf"
	"github.com/strata-llm/strata/runtime/pack"
	"github.com/strata-llm/strata/runtime/stream"
	"github.com/strata-llm/strata/runtime/weights"
)

// GGUFOptions tune how a GGUF model is opened.
type GGUFOptions struct {
	HFOptions // Context 0: the embedded config's runtime.context_length
	// Config is the model config; nil takes the one strata embeds in the
	// file (strata.config), or derives it from a qwen3next file's metadata
	// (weights.ConfigFromMetadata). Its quant plan is replaced by the
	// formats the file's tensors hold: every role runs as it is stored.
	Config *models.Config
	// Pack is the .experts file to read routed experts from: "" takes
	// PATH.experts when it exists, "-" never uses one.
	Pack string
}

// configOf is the config strata embeds in the file, or, in a file without
// one (llama.cpp's), the one its qwen3next metadata gives.
func configOf(f *gguf.File) (*models.Config, error) {
	if _, ok := f.Value(gguf.KeyConfig); ok {
		return weights.ConfigOf(f)
	}
	return weights.ConfigFromMetadata(f)
}

// OpenGGUF opens a GGUF model (written by strata convert or strata synth, or a
// llama.cpp qwen3next file as it is), builds its window
// graphs and loads its weights, the routed experts through the .experts pack
// when there is one. A pack that does not belong to the file is refused.
func OpenGGUF(path string, opt GGUFOptions) (*Loaded, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	// The mapping is needed after the load only when the backend uses
	// weights in place from it, experts stream from it, or the host gathers
	// n-gram table rows from it.
	keep := false
	defer func() {
		if !keep {
			f.Close()
		}
	}()
	c := opt.Config
	if c == nil {
		if c, err = configOf(f); err != nil {
			return nil, err
		}
	}
	if err := checkContext(c, opt.Context); err != nil {
		return nil, err
	}
	if opt.Context > 0 {
		cc := *c
		cc.Runtime.ContextLength = opt.Context
		c = &cc
	}
	src, err := weights.NewGGUF(f, c)
	if err != nil {
		return nil, err
	}
	// The file's own tensor types are the plan: each role runs in the
	// format it is stored in, nothing is quantized again.
	if c, err = src.WithFileFormats(c); err != nil {
		return nil, err
	}
	packPath := opt.Pack
	if packPath == "" {
		packPath = pack.Path(path)
		if _, err := os.Stat(packPath); errors.Is(err, fs.ErrNotExist) {
			packPath = "-"
		}
	}
	var reader stream.Reader
	var closers []func() error
	var pk *pack.Reader
	if packPath != "-" {
		if pk, err = pack.Open(packPath, f); err != nil {
			return nil, err
		}
		src.UsePack(pk)
	}
	if err := src.Check(c.Tensors()); err != nil {
		if pk != nil {
			pk.Close()
		}
		return nil, err
	}
	rows := opt.PrefillRows
	if rows == 0 {
		rows = c.Windows.PrefillRows
	}
	if rows < 1 {
		return nil, fmt.Errorf("--prefill-rows must be ≥ 1, got %d", rows)
	}
	c = withRouting(c, opt.HFOptions)
	c, graphs, rows, hopt, err := windowsFor(c, opt.HFOptions, rows)
	if err != nil {
		if pk != nil {
			pk.Close()
		}
		return nil, err
	}
	opt.HFOptions = hopt
	if pk != nil {
		if opt.ArenaExperts > 0 {
			reader = pk
			if opt.History == "" {
				opt.History = packPath + ".usage" // learns across restarts
			}
			closers = append(closers, pk.Close)
			if opt.Stream.Verify == nil {
				opt.Stream.Verify = pk.Verify // a corrupt read is never published
			}
		} else {
			defer pk.Close()
		}
	}
	m, err := loadEngine(c, graphs, src, opt.HFOptions, reader)
	if err != nil {
		for _, cl := range closers {
			cl()
		}
		return nil, err
	}
	if opt.ArenaExperts > 0 || len(c.Architecture.PLE.LayerIDs) > 0 || m.Weights().InPlace > 0 {
		keep = true
		closers = append(closers, f.Close)
	}
	return &Loaded{Config: c, Model: m, PrefillRows: rows, ArenaExperts: opt.ArenaExperts, closers: closers}, nil
}
