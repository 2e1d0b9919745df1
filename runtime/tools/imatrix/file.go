package imatrix

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// The GGUF-based format's keys and tensor suffixes (llama.cpp's imatrix).
const (
	keyType       = "general.type"
	keyDatasets   = "imatrix.datasets"
	keyChunkCount = "imatrix.chunk_count"
	keyChunkSize  = "imatrix.chunk_size"
	suffixSums    = ".in_sum2"
	suffixCounts  = ".counts"
)

// Read reads either format, told apart by the GGUF magic.
func Read(path string) (*Matrix, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("imatrix: %w", err)
	}
	var m *Matrix
	if bytes.HasPrefix(b, []byte("GGUF")) {
		m, err = readGGUF(path)
	} else {
		m, err = parseLegacy(b)
	}
	if err != nil {
		return nil, fmt.Errorf("imatrix %s: %w", path, err)
	}
	return m, nil
}

// Write writes m to path, in the legacy format when the name ends in .dat,
// else the GGUF-based one (llama-imatrix's choice by extension too).
func Write(path string, m *Matrix) error {
	for _, n := range m.Names() {
		if err := m.Entries[n].check(n); err != nil {
			return err
		}
	}
	if strings.EqualFold(filepath.Ext(path), ".dat") {
		return outfile.WriteFile(path, m.legacy())
	}
	return m.writeGGUF(path)
}

// legacy is m in the .dat format. Each value is the column's mean x² times
// ncall, as llama-imatrix stores it (the reader divides by ncall); ncall is
// the chunk count (1 when unknown). A matrix that saw no rows stores zeros.
func (m *Matrix) legacy() []byte {
	ncall := max(m.ChunkCount, 1)
	var b []byte
	le := binary.LittleEndian
	b = le.AppendUint32(b, uint32(len(m.Entries)))
	for _, n := range m.Names() {
		e := m.Entries[n]
		b = le.AppendUint32(b, uint32(len(n)))
		b = append(b, n...)
		b = le.AppendUint32(b, uint32(ncall))
		b = le.AppendUint32(b, uint32(len(e.Sums)))
		for i, s := range e.Sums {
			var v float32
			if c := e.Counts[i/e.Cols]; c > 0 {
				v = s / c * float32(ncall)
			}
			b = le.AppendUint32(b, math.Float32bits(v))
		}
	}
	b = le.AppendUint32(b, uint32(m.ChunkCount))
	ds := strings.Join(m.Datasets, ",")
	b = le.AppendUint32(b, uint32(len(ds)))
	return append(b, ds...)
}

// parseLegacy reads the .dat format. The number of columns is not stored:
// nval is cols × experts, so the expert tensors (nval a multiple of the
// plain ones' widths) cannot be told apart from the bytes alone; entries
// are read as one matrix of nval columns and split by SplitExperts.
func parseLegacy(b []byte) (*Matrix, error) {
	r := &reader{b: b}
	n := r.int("entry count")
	if r.err == nil && (n < 1 || n > 1<<20) {
		return nil, fmt.Errorf("legacy imatrix: %d entries (expected 1…2^20; is this an imatrix file?)", n)
	}
	m := &Matrix{Entries: map[string]*Entry{}}
	for i := 0; i < n && r.err == nil; i++ {
		name := string(r.bytes(r.int("name length"), "name"))
		ncall := r.int("ncall of " + name)
		nval := r.int("nval of " + name)
		if r.err != nil {
			break
		}
		if nval < 1 || 4*nval > len(r.b)-r.off {
			return nil, fmt.Errorf("legacy imatrix: entry %s has nval %d, more than the file holds", name, nval)
		}
		vals := r.bytes(4*nval, "values of "+name)
		e := &Entry{Cols: nval, Sums: make([]float32, nval), Counts: []float32{float32(ncall)}}
		for j := range e.Sums {
			e.Sums[j] = math.Float32frombits(binary.LittleEndian.Uint32(vals[4*j:]))
		}
		if _, dup := m.Entries[name]; dup {
			return nil, fmt.Errorf("legacy imatrix: entry %s twice", name)
		}
		m.Entries[name] = e
	}
	if r.err != nil {
		return nil, fmt.Errorf("legacy imatrix: %w", r.err)
	}
	// The trailer (chunk count, dataset name) is optional in old files.
	if len(r.b)-r.off >= 4 {
		m.ChunkCount = r.int("chunk count")
		if len(r.b)-r.off >= 4 {
			if ds := string(r.bytes(r.int("dataset length"), "dataset name")); ds != "" && r.err == nil {
				m.Datasets = []string{ds}
			}
		}
		if r.err != nil {
			return nil, fmt.Errorf("legacy imatrix trailer: %w", r.err)
		}
	}
	return m, nil
}

// SplitExperts gives a legacy entry its real geometry: cols columns per
// matrix (a legacy file stores only cols × matrices). The converter calls
// it with the tensor's ne0.
func (e *Entry) SplitExperts(name string, cols int) error {
	if e.Cols == cols {
		return nil
	}
	if e.NMat() != 1 || cols <= 0 || e.Cols%cols != 0 {
		return fmt.Errorf("imatrix entry %s has %d values per matrix × %d, which does not fit rows of %d", name, e.Cols, e.NMat(), cols)
	}
	n := e.Cols / cols
	c := e.Counts[0]
	e.Cols, e.Counts = cols, make([]float32, n)
	for i := range e.Counts {
		e.Counts[i] = c
	}
	return nil
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) bytes(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b)-r.off {
		r.err = fmt.Errorf("%s: %d bytes at offset %d, but the file has %d", what, n, r.off, len(r.b))
		return nil
	}
	out := r.b[r.off : r.off+n]
	r.off += n
	return out
}

func (r *reader) int(what string) int {
	b := r.bytes(4, what)
	if b == nil {
		return 0
	}
	return int(int32(binary.LittleEndian.Uint32(b)))
}

var f32Type, _ = quant.GGMLTypeByCode(0)

func (m *Matrix) writeGGUF(path string) error {
	kv := []gguf.KV{
		{Key: keyType, Value: "imatrix"},
		{Key: keyDatasets, Value: gguf.Array{Elem: gguf.TypeString, Values: append([]string{}, m.Datasets...)}},
		{Key: keyChunkCount, Value: uint32(m.ChunkCount)},
		{Key: keyChunkSize, Value: uint32(m.ChunkSize)},
	}
	var infos []gguf.TensorInfo
	var data [][]byte
	for _, n := range m.Names() {
		e := m.Entries[n]
		infos = append(infos,
			gguf.TensorInfo{Name: n + suffixSums, Dims: []uint64{uint64(e.Cols), uint64(e.NMat())}, Type: f32Type},
			gguf.TensorInfo{Name: n + suffixCounts, Dims: []uint64{1, uint64(e.NMat())}, Type: f32Type})
		data = append(data, f32Bytes(e.Sums), f32Bytes(e.Counts))
	}
	w, err := gguf.Create(path, kv, infos)
	if err != nil {
		return fmt.Errorf("imatrix: %w", err)
	}
	for i, t := range infos {
		if err := w.WriteTensor(t.Name, data[i]); err != nil {
			w.Abort()
			return fmt.Errorf("imatrix %s: %w", path, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("imatrix: %w", err)
	}
	return nil
}

func readGGUF(path string) (*Matrix, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if t, err := f.String(keyType); err != nil || t != "imatrix" {
		return nil, fmt.Errorf("a GGUF file, but not an imatrix (%s is %q, expected \"imatrix\")", keyType, t)
	}
	m := &Matrix{Entries: map[string]*Entry{}}
	if a, err := f.Array(keyDatasets); err == nil {
		if s, ok := a.Values.([]string); ok {
			m.Datasets = s
		}
	}
	if v, err := f.Uint(keyChunkCount); err == nil {
		m.ChunkCount = int(v)
	}
	if v, err := f.Uint(keyChunkSize); err == nil {
		m.ChunkSize = int(v)
	}
	for _, ti := range f.Tensors {
		name, ok := strings.CutSuffix(ti.Name, suffixSums)
		if !ok {
			continue
		}
		sums, err := f32Tensor(f, ti.Name)
		if err != nil {
			return nil, err
		}
		counts, err := f32Tensor(f, name+suffixCounts)
		if err != nil {
			return nil, err
		}
		e := &Entry{Cols: int(ti.Dims[0]), Sums: sums, Counts: counts}
		if err := e.check(name); err != nil {
			return nil, err
		}
		m.Entries[name] = e
	}
	if len(m.Entries) == 0 {
		return nil, errors.New("no *.in_sum2 tensors")
	}
	return m, nil
}

func f32Tensor(f *gguf.File, name string) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("tensor %s is missing", name)
	}
	if t.Type.Code != 0 {
		return nil, fmt.Errorf("tensor %s is %s, expected f32", name, t.Type.Name)
	}
	v := make([]float32, len(t.Data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return v, nil
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 0, 4*len(v))
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}
