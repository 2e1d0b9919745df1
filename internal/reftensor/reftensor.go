// Package reftensor reads, for tests, the reference tensors the HF scripts
// stored (token ids as int32, logits as f32 [rows, vocab]) from a
// safetensors file.
package reftensor

import (
	"testing"

	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// File is a reference file open for one test; it is closed when the test
// ends, and any read that fails fails the test.
type File struct {
	t    testing.TB
	path string
	f    *safetensors.File
}

// Open opens the safetensors file at path for t.
func Open(t testing.TB, path string) *File {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return &File{t: t, path: path, f: f}
}

func (r *File) tensor(name string) safetensors.Tensor {
	r.t.Helper()
	tt, ok := r.f.Tensor(name)
	if !ok {
		r.t.Fatalf("%s: no tensor %s", r.path, name)
	}
	return tt
}

// Ints reads an int32 tensor as ints.
func (r *File) Ints(name string) []int {
	r.t.Helper()
	v, err := r.tensor(name).Int32s()
	if err != nil {
		r.t.Fatalf("%s: %s: %v", r.path, name, err)
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// Rows reads an f32 [rows, n] tensor as its rows.
func (r *File) Rows(name string) [][]float32 {
	r.t.Helper()
	tt := r.tensor(name)
	v, err := tt.Float32s()
	if err != nil {
		r.t.Fatalf("%s: %s: %v", r.path, name, err)
	}
	n := tt.Shape[1]
	var out [][]float32
	for i := 0; i < tt.Shape[0]; i++ {
		out = append(out, v[i*n:(i+1)*n])
	}
	return out
}
