package convert

import (
	"fmt"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/tools/imatrix"
)

// writeWeighted writes tensor t quantized with its imatrix weights, when the
// matrix has an entry for it, and reports false, having written nothing,
// otherwise. A stacked expert role goes expert by expert, each with its own
// weights; a role split across tensors gives each its rows, a role whose
// columns the tensor reorders is reordered first (the entry is in the
// tensor's column order already). An expert the imatrix text never reached
// is quantized without weights, as llama-quantize does with zero counts.
func writeWeighted(w *gguf.Writer, src Source, t tensor, m *imatrix.Matrix, progress func(int)) (bool, error) {
	if m == nil || t.tr != gguf.Same {
		return false, nil
	}
	e, ok := m.Entries[t.info.Name]
	if !ok {
		return false, nil
	}
	if err := e.SplitExperts(t.info.Name, t.rl.Len); err != nil {
		return false, err
	}
	stacked := len(t.spec.Shape) == 3 && t.runs == nil && t.cols == nil
	nmat := 1
	if stacked {
		nmat = t.spec.Shape[0]
	}
	if e.Cols != t.rl.Len || e.NMat() != nmat {
		return false, fmt.Errorf("the imatrix entry has %d matrices of %d columns; the tensor %d of %d", e.NMat(), e.Cols, nmat, t.rl.Len)
	}
	n, stored := t.rl.Len, t.rl.Stored
	for mat := 0; mat < nmat; mat++ {
		var v []float32 // the matrix's rows in the tensor's order, n wide
		if stacked {
			b := make([]byte, 4*t.spec.Rows()/nmat*n)
			if err := src.Read(t.spec, mat, "f32", b); err != nil {
				return false, err
			}
			v = make([]float32, len(b)/4)
			f32Format.Decode(b, v)
		} else {
			all, err := readF32Any(src, t.spec)
			if err != nil {
				return false, err
			}
			v = toTensorOrder(t.cols, all, n)
			if t.runs != nil {
				v = gatherRows(v, n, int(t.info.Dims[1]), t.runs)
			}
		}
		rows := len(v) / n
		x := v
		if stored > n { // rows zero-padded to whole blocks
			x = make([]float32, rows*stored)
			for r := 0; r < rows; r++ {
				copy(x[r*stored:r*stored+n], v[r*n:(r+1)*n])
			}
		}
		qw, err := m.Weights(t.info.Name, mat)
		if err != nil {
			return false, err
		}
		if qw != nil && stored > n {
			qw = append(qw, make([]float32, stored-n)...) // the padding's weight: the floor below
		}
		out := make([]byte, rows*t.rl.RowBytes())
		if err := encodeRows(t.rl.Format, x, qw, out); err != nil {
			return false, err
		}
		if _, err := w.Write(out); err != nil {
			return false, err
		}
		progress(len(out))
	}
	return true, nil
}

// gatherRows picks a split tensor's rows (of n values) out of its role's.
func gatherRows(v []float32, n, rows int, runs []gguf.RowRun) []float32 {
	out := make([]float32, rows*n)
	for _, r := range runs {
		copy(out[r.TensorRow*n:(r.TensorRow+r.Rows)*n], v[r.RoleRow*n:(r.RoleRow+r.Rows)*n])
	}
	return out
}

// encodeRows quantizes x with the weights qw (nil: none). All-zero weights
// (columns that never saw an activation) would leave the scale search
// nothing to fit, so a zero weight is raised to a small fraction of the
// row's mean weight.
func encodeRows(f *quant.Format, x, qw []float32, dst []byte) error {
	if qw != nil {
		var mean float64
		for _, v := range qw {
			mean += float64(v)
		}
		mean /= float64(len(qw))
		if mean <= 0 {
			qw = nil
		} else {
			floor := float32(mean * 1e-6)
			q := make([]float32, len(qw))
			for i, v := range qw {
				q[i] = max(v, floor)
			}
			qw = q
		}
	}
	return f.EncodeImportance(x, qw, dst)
}

// ImatrixTargets maps each role of model c (the engine's tensor names) to
// the GGUF tensors Write makes of it, with their column order, so the
// statistics the engine collects per role are named as llama.cpp names
// them (imatrix.Collector.Matrix).
func ImatrixTargets(c *models.Config, opt Options) (map[string][]imatrix.Target, error) {
	_, tensors, _, err := plan(c, opt)
	if err != nil {
		return nil, err
	}
	out := map[string][]imatrix.Target{}
	for _, t := range tensors {
		if t.table || t.tr != gguf.Same {
			continue
		}
		tg := imatrix.Target{Name: t.info.Name}
		if t.cols != nil {
			tg.Perm = make([]int, t.rl.Len)
			for _, r := range t.cols {
				for j := 0; j < r.Cols; j++ {
					tg.Perm[r.TensorCol+j] = r.RoleCol + j
				}
			}
		}
		out[t.spec.Name] = append(out[t.spec.Name], tg)
	}
	return out, nil
}

// imatrixRequired are the formats llama-quantize refuses to write without an
// importance matrix: at 1.5–2.3 bits/weight an unweighted fit loses too much.
var imatrixRequired = map[string]bool{"iq2_xxs": true, "iq2_xs": true, "iq1_s": true, "iq1_m": true}

// NeedsImatrix lists the GGUF tensors of model c that Write would store in
// a format llama-quantize refuses to write without an importance matrix
// (after row fallbacks: a tensor that falls back to iq4_nl is not listed).
func NeedsImatrix(c *models.Config, opt Options) ([]string, error) {
	_, tensors, _, err := plan(c, opt)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, t := range tensors {
		if imatrixRequired[t.rl.Format.Name] {
			out = append(out, t.info.Name)
		}
	}
	return out, nil
}
