// Package imatrix is the importance matrix of llama.cpp's llama-imatrix: for
// every weight tensor (by its GGUF name), the sum of the squared activations
// that entered each input column, and how many rows were summed, per matrix
// (one per routed expert for the stacked expert tensors). The low-bit
// quantizers weight each weight's error by its column's mean x², so the
// columns that carry large activations are kept most exactly.
//
// Both of llama.cpp's file formats are read and written: the GGUF-based one
// (general.type "imatrix"; per tensor NAME.in_sum2 f32 [cols, nmat] and
// NAME.counts f32 [1, nmat]) and the legacy binary .dat (int32 entries; per
// entry int32 name length, name, int32 ncall, int32 nval, f32 values, each
// the column's mean x² times ncall; then int32 chunks and int32-length
// dataset name). A matrix written by either tool serves both.
package imatrix

import (
	"fmt"
	"sort"
)

// Entry is one tensor's statistics.
type Entry struct {
	Cols int // input columns (the tensor's ne0)
	// Sums are Σx² per column, matrix after matrix (len NMat()·Cols).
	Sums []float32
	// Counts are the rows summed into each matrix's Sums.
	Counts []float32
}

// NMat is the number of matrices (experts) the entry covers.
func (e *Entry) NMat() int { return len(e.Counts) }

// Matrix is a whole importance matrix.
type Matrix struct {
	Entries    map[string]*Entry // by GGUF tensor name
	Datasets   []string          // the text files it was collected on
	ChunkCount int               // windows (chunks) it was collected over
	ChunkSize  int               // tokens per window
}

// Names lists the entries, sorted.
func (m *Matrix) Names() []string {
	out := make([]string, 0, len(m.Entries))
	for n := range m.Entries {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Weights returns the mean x² per column of matrix mat of tensor name: the
// importance weights ggml's quantizers take as quant_weights. It returns
// nil when the tensor has no entry, or the matrix saw no rows (an expert
// the text never routed to), so the caller quantizes without.
func (m *Matrix) Weights(name string, mat int) ([]float32, error) {
	e, ok := m.Entries[name]
	if !ok {
		return nil, nil
	}
	if mat < 0 || mat >= e.NMat() {
		return nil, fmt.Errorf("imatrix entry %s has %d matrices, asked for matrix %d", name, e.NMat(), mat)
	}
	c := e.Counts[mat]
	if c <= 0 {
		return nil, nil
	}
	w := make([]float32, e.Cols)
	for i, s := range e.Sums[mat*e.Cols : (mat+1)*e.Cols] {
		w[i] = s / c
	}
	return w, nil
}

func (e *Entry) check(name string) error {
	if e.Cols <= 0 || len(e.Counts) == 0 || len(e.Sums) != e.Cols*len(e.Counts) {
		return fmt.Errorf("imatrix entry %s: %d sums for %d matrices of %d columns", name, len(e.Sums), len(e.Counts), e.Cols)
	}
	return nil
}
