package load

import (
	"errors"
	"io/fs"
	"os"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/format/pack"
	"github.com/strata-llm/strata/runtime/resolve"
)

// GGUFOptions tune how a GGUF model is opened.
type GGUFOptions struct {
	Options // Context 0: the embedded config's runtime.context_length
	// Config is the model config; nil takes the one strata embeds in the
	// file (strata.config), or derives it from a qwen3next or qwen4exp file's metadata
	// (arch.ConfigOf). Its quant plan is replaced by the
	// formats the file's tensors hold: every role runs as it is stored.
	Config *models.Config
	// Pack is the .experts file to read routed experts from: "" takes
	// PATH.experts when it exists, "-" never uses one.
	Pack string
}

// OpenGGUF opens a GGUF model (written by strata convert or strata synth, or a
// llama.cpp qwen3next file as it is), finds the artifact generated for its
// config and the formats its tensors hold, and loads its graphs and weights, the routed experts through the .experts pack
// when there is one. A pack that does not belong to the file is refused.
func GGUF(path string, opt GGUFOptions) (*Loaded, error) {
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
	c, src, err := resolve.GGUF(f, opt.Config, opt.resolveOptions())
	if err != nil {
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
	var graphs []*graph.Graph
	var rows int
	want := c.Runtime.ContextLength // an artifact made for a longer context may serve; the run keeps this limit
	a, from, c, err := findArtifact(c, modelFile{flag: "--gguf", path: path, beside: artifact.DirFor(true, path)}, opt.Options)
	if err == nil {
		var hopt Options
		c, graphs, rows, hopt, err = windowsFor(c, a, opt.Options)
		opt.Options = hopt
	}
	if err != nil {
		if pk != nil {
			pk.Close()
		}
		return nil, err
	}
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
	m, err := loadEngine(c, a, graphs, src, opt.Options, reader)
	if err == nil {
		if err = m.LimitContext(want); err != nil {
			m.Close()
		}
	}
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
	return &Loaded{Config: c, Model: m, PrefillRows: rows, ArenaExperts: opt.ArenaExperts, Artifact: a, ArtifactFrom: from,
		Threads: cpuThreads(c, opt.Options), closers: closers}, nil
}
