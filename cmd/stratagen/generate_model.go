package main

import (
	"fmt"
	"io"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/resolve"
)

// modelSpec is a --gguf or --hf generate request.
type modelSpec struct {
	gguf, hf, out    string
	context, prefill int
	moce             bool
	moceLambda       float64
	moceMaxRank      int
	readAhead        bool
}

// generateForModel generates the artifact of a model file as strata opens
// it (package resolve), beside the model or in --out.
func generateForModel(s modelSpec, stdout io.Writer) error {
	opt := resolve.Options{Context: s.context, PrefillRows: s.prefill, MoCE: s.moce, MoCELambda: s.moceLambda, MoCEMaxRank: s.moceMaxRank, ReadAhead: s.readAhead}
	var c *models.Config
	input, flag := s.hf, "--hf"
	if s.gguf != "" {
		input, flag = s.gguf, "--gguf"
		f, err := gguf.Open(s.gguf)
		if err != nil {
			return err
		}
		defer f.Close()
		if c, _, err = resolve.GGUF(f, nil, opt); err != nil {
			return err
		}
	} else {
		var err error
		if c, err = resolve.HF(s.hf, opt); err != nil {
			return err
		}
	}
	dir := s.out
	if dir == "" {
		dir = artifact.DirFor(flag == "--gguf", input)
	}
	// Write replaces only an artifact folder, so no input is overwritten.
	a, err := gen.Generate(c)
	if err != nil {
		return err
	}
	if err := a.Write(dir); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "stratagen: %s: artifact in %s (%d graphs, key %s)\n", c.Name, dir, len(a.Graphs), artifact.ShortKey(a.Key))
	return nil
}
