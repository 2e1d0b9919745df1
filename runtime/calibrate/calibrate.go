// Package calibrate runs a model over calibration text and collects
// llama.cpp's importance matrix: for every weight matrix, the sums of the
// squares of the activations entering each input column (per routed expert
// for the expert tensors), named as the GGUF's tensors. The activations
// come from the cpu kernels (cpu.SetObserver), so the model must run on the
// cpu backend.
package calibrate

import (
	"fmt"
	"path/filepath"
	"sort"

	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/tools/convert"
	"github.com/strata-llm/strata/runtime/tools/imatrix"
)

// Options say how Imatrix feeds the text.
type Options struct {
	Ctx  int // tokens per window
	Rows int // rows per engine window
	// Files are the text's files, recorded in the matrix by base name.
	Files []string
	// Window, when set, is called after each window with its number (from
	// 1) and the count.
	Window func(n, windows int)
}

// Imatrix feeds each window of opt.Ctx tokens at starts from a fresh state
// (the MTP head too, when the model has one, for its experts) and returns
// the statistics named as convert writes model m's GGUF tensors. unnamed
// lists, sorted, the engine tensors the GGUF has no tensor for; they are
// left out.
func Imatrix(m *engine.Model, tokens, starts []int, opt Options) (mat *imatrix.Matrix, unnamed []string, err error) {
	targets, err := convert.ImatrixTargets(m.Config, convert.Options{})
	if err != nil {
		return nil, nil, fmt.Errorf("naming the tensors as the GGUF does: %w", err)
	}
	col, err := collect(m, tokens, starts, opt)
	if err != nil {
		return nil, nil, err
	}
	mat, err = col.Matrix(func(t string) []imatrix.Target {
		tg, ok := targets[t]
		if !ok {
			unnamed = append(unnamed, t)
		}
		return tg
	})
	if err != nil {
		return nil, nil, err
	}
	if len(mat.Entries) == 0 {
		return nil, nil, fmt.Errorf("no weight matrix saw an activation (is the model's backend cpu?)")
	}
	sort.Strings(unnamed)
	for _, f := range opt.Files {
		mat.Datasets = append(mat.Datasets, filepath.Base(f))
	}
	mat.ChunkCount, mat.ChunkSize = len(starts), opt.Ctx
	return mat, unnamed, nil
}

// collect feeds the windows with the cpu kernels reporting the activations
// that enter every weight matrix to a collector.
func collect(m *engine.Model, tokens, starts []int, opt Options) (*imatrix.Collector, error) {
	col := imatrix.NewCollector()
	prev := cpu.SetObserver(col)
	defer cpu.SetObserver(prev)
	for i, s := range starts {
		if s < 0 || s+opt.Ctx > len(tokens) {
			return nil, fmt.Errorf("window %d starts at token %d: %d tokens of %d do not fit", i+1, s, opt.Ctx, len(tokens))
		}
		w := tokens[s : s+opt.Ctx]
		var err error
		if m.HasMTP() {
			_, _, err = m.TeacherForced(w, opt.Rows)
		} else {
			_, err = m.TrunkForced(w, opt.Rows)
		}
		if err != nil {
			return nil, fmt.Errorf("window %d (tokens %d…%d): %w", i+1, s, s+opt.Ctx-1, err)
		}
		if opt.Window != nil {
			opt.Window(i+1, len(starts))
		}
	}
	return col, nil
}
