package gguf

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/mmap"
)

// maxArrayDepth bounds nested arrays: real files nest at most once, and a
// bound keeps a hostile file from recursing the reader to death.
const maxArrayDepth = 8

// Open memory-maps path read-only and validates it completely (header,
// metadata, tensor infos, alignment, every tensor's byte range), so later
// Tensor lookups are safe to slice.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close() // the mapping outlives the descriptor
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if !st.Mode().IsRegular() {
		what := "not a regular file"
		if st.IsDir() {
			what = "a directory (for an HF checkpoint directory, use --hf)"
		}
		return nil, fmt.Errorf("gguf %s is %s, expected a GGUF file", path, what)
	}
	if st.Size() > math.MaxInt {
		return nil, fmt.Errorf("gguf %s: file of %d bytes is too large to map", path, st.Size())
	}
	m, err := mmap.Map(fd, int(st.Size()))
	if err != nil {
		return nil, fmt.Errorf("gguf %s: mmap: %w", path, err)
	}
	f, err := Parse(path, m)
	if err != nil {
		mmap.Unmap(m)
		return nil, err
	}
	f.mapping = m
	return f, nil
}

// Parse validates and indexes a GGUF file held in memory; name is used in
// errors. Tensor data are views of b.
func Parse(name string, b []byte) (*File, error) {
	f := &File{Path: name, kvIndex: map[string]int{}, tIndex: map[string]int{}}
	if err := f.parse(b); err != nil {
		return nil, fmt.Errorf("gguf %s: %w", name, err)
	}
	return f, nil
}

// errTruncated marks reads past the end, so callers can say what was cut.
var errTruncated = errors.New("file truncated")

type decoder struct {
	b   []byte
	off int
}

func (d *decoder) take(n uint64) ([]byte, error) {
	if n > uint64(len(d.b)-d.off) {
		return nil, fmt.Errorf("%w: %d bytes needed at offset %d, %d left", errTruncated, n, d.off, len(d.b)-d.off)
	}
	p := d.b[d.off : d.off+int(n)]
	d.off += int(n)
	return p, nil
}

func (d *decoder) u32() (uint32, error) {
	p, err := d.take(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(p), nil
}

func (d *decoder) u64() (uint64, error) {
	p, err := d.take(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(p), nil
}

func (d *decoder) str() (string, error) {
	n, err := d.u64()
	if err != nil {
		return "", err
	}
	p, err := d.take(n)
	if err != nil {
		return "", err
	}
	return string(p), nil
}

func (f *File) parse(b []byte) error {
	d := &decoder{b: b}
	magic, err := d.u32()
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if magic != Magic {
		return fmt.Errorf("bad magic %#08x (want %#08x, \"GGUF\"): not a GGUF file", magic, Magic)
	}
	if f.Version, err = d.u32(); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	switch {
	case f.Version == 2 || f.Version == 3:
	case f.Version == 1:
		return fmt.Errorf("GGUF version 1 is not supported (it used 32-bit counts; convert the file with a current llama.cpp)")
	case f.Version&0xffff == 0 && f.Version != 0:
		return fmt.Errorf("version field %#x: a big-endian GGUF file, which is not supported", f.Version)
	default:
		return fmt.Errorf("unsupported GGUF version %d (want 2 or 3)", f.Version)
	}
	nTensors, err := d.u64()
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	nKV, err := d.u64()
	if err != nil {
		return fmt.Errorf("header: %w", err)
	}
	// Each pair takes at least 12 bytes and each tensor info at least 24, so
	// a count beyond that is a corrupt header, not a reason to allocate.
	rest := uint64(len(b) - d.off)
	if nKV > rest/12 {
		return fmt.Errorf("header claims %d metadata pairs, more than the %d bytes after it can hold (%w or corrupt)", nKV, rest, errTruncated)
	}
	if nTensors > rest/24 {
		return fmt.Errorf("header claims %d tensors, more than the %d bytes after it can hold (%w or corrupt)", nTensors, rest, errTruncated)
	}

	f.KV = make([]KV, 0, nKV)
	for i := uint64(0); i < nKV; i++ {
		key, err := d.str()
		if err != nil {
			return fmt.Errorf("metadata pair %d: key: %w", i, err)
		}
		if _, dup := f.kvIndex[key]; dup {
			return fmt.Errorf("metadata key %s appears twice", key)
		}
		t, err := d.u32()
		if err != nil {
			return fmt.Errorf("metadata key %s: type: %w", key, err)
		}
		v, err := d.value(ValueType(t), 0)
		if err != nil {
			return fmt.Errorf("metadata key %s: %w", key, err)
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{key, v})
	}

	f.Alignment = DefaultAlignment
	if v, ok := f.Value(KeyAlignment); ok {
		a, isU32 := v.(uint32)
		if !isU32 {
			return fmt.Errorf("metadata key %s is a %T, want uint32", KeyAlignment, v)
		}
		if a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("metadata key %s = %d: not a power of two", KeyAlignment, a)
		}
		f.Alignment = int64(a)
	}

	f.Tensors = make([]TensorInfo, 0, nTensors)
	for i := uint64(0); i < nTensors; i++ {
		ti, err := d.tensorInfo(f.Alignment)
		if err != nil {
			return fmt.Errorf("tensor info %d: %w", i, err)
		}
		if _, dup := f.tIndex[ti.Name]; dup {
			return fmt.Errorf("tensor %s appears twice", ti.Name)
		}
		f.tIndex[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}

	f.DataOffset = alignUp(int64(d.off), f.Alignment)
	if f.DataOffset > int64(len(b)) {
		if len(f.Tensors) > 0 {
			return fmt.Errorf("%w: the data section would start at %d, past the end of the %d-byte file", errTruncated, f.DataOffset, len(b))
		}
		f.DataOffset = int64(len(b)) // no tensors: the padding may be absent
	}
	f.data = b[f.DataOffset:]
	return f.checkRanges()
}

// checkRanges verifies that every tensor lies inside the data section and
// that no two overlap, reporting in offset order so the message is stable.
func (f *File) checkRanges() error {
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	n := int64(len(f.data))
	for k, i := range order {
		t := f.Tensors[i]
		if t.Offset > n || t.Size > n-t.Offset {
			return fmt.Errorf("%w: tensor %s needs bytes [%d, %d) of the data section, which has %d", errTruncated, t.Name, t.Offset, t.Offset+t.Size, n)
		}
		if k > 0 {
			p := f.Tensors[order[k-1]]
			if t.Offset < p.Offset+p.Size {
				return fmt.Errorf("tensors %s [%d, %d) and %s [%d, %d) overlap", p.Name, p.Offset, p.Offset+p.Size, t.Name, t.Offset, t.Offset+t.Size)
			}
		}
	}
	return nil
}

func (d *decoder) tensorInfo(align int64) (TensorInfo, error) {
	name, err := d.str()
	if err != nil {
		return TensorInfo{}, fmt.Errorf("name: %w", err)
	}
	ti := TensorInfo{Name: name}
	if name == "" {
		return ti, fmt.Errorf("tensor name is empty")
	}
	if len(name) > MaxNameLen {
		return ti, fmt.Errorf("tensor name %.80q is %d bytes, longer than ggml's %d", name, len(name), MaxNameLen)
	}
	nd, err := d.u32()
	if err != nil {
		return ti, fmt.Errorf("tensor %s: %w", name, err)
	}
	if nd == 0 || nd > MaxDims {
		return ti, fmt.Errorf("tensor %s: %d dims (want 1 to %d)", name, nd, MaxDims)
	}
	ti.Dims = make([]uint64, nd)
	for i := range ti.Dims {
		if ti.Dims[i], err = d.u64(); err != nil {
			return ti, fmt.Errorf("tensor %s: %w", name, err)
		}
	}
	code, err := d.u32()
	if err != nil {
		return ti, fmt.Errorf("tensor %s: %w", name, err)
	}
	if ti.Type, err = quant.GGMLTypeByCode(int(code)); err != nil {
		return ti, fmt.Errorf("tensor %s: %w", name, err)
	}
	off, err := d.u64()
	if err != nil {
		return ti, fmt.Errorf("tensor %s: %w", name, err)
	}
	if off > math.MaxInt64 || int64(off)%align != 0 {
		return ti, fmt.Errorf("tensor %s: offset %d is not a multiple of the alignment %d", name, off, align)
	}
	ti.Offset = int64(off)
	if ti.Size, err = tensorSize(ti.Dims, ti.Type); err != nil {
		return ti, fmt.Errorf("tensor %s: %w", name, err)
	}
	return ti, nil
}

// value reads one value of type t; depth counts enclosing arrays.
func (d *decoder) value(t ValueType, depth int) (any, error) {
	if t != TypeArray && t != TypeString {
		p, err := d.takeFixed(t)
		if err != nil {
			return nil, err
		}
		return scalar(t, p)
	}
	if t == TypeString {
		return d.str()
	}
	if depth >= maxArrayDepth {
		return nil, fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
	}
	et, err := d.u32()
	if err != nil {
		return nil, fmt.Errorf("array element type: %w", err)
	}
	elem := ValueType(et)
	n, err := d.u64()
	if err != nil {
		return nil, fmt.Errorf("array length: %w", err)
	}
	// Refuse counts the remaining bytes cannot hold before allocating.
	minSize := uint64(elem.fixedSize())
	switch elem {
	case TypeString:
		minSize = 8
	case TypeArray:
		minSize = 12
	}
	if minSize == 0 {
		return nil, fmt.Errorf("array of unknown element type %d", et)
	}
	if n > uint64(len(d.b)-d.off)/minSize {
		return nil, fmt.Errorf("%w: array of %d %s cannot fit in the %d bytes left", errTruncated, n, elem, len(d.b)-d.off)
	}
	switch elem {
	case TypeString:
		out := make([]string, n)
		for i := range out {
			if out[i], err = d.str(); err != nil {
				return nil, fmt.Errorf("array element %d: %w", i, err)
			}
		}
		return Array{elem, out}, nil
	case TypeArray:
		out := make([]Array, n)
		for i := range out {
			v, err := d.value(TypeArray, depth+1)
			if err != nil {
				return nil, fmt.Errorf("array element %d: %w", i, err)
			}
			out[i] = v.(Array)
		}
		return Array{elem, out}, nil
	}
	p, err := d.take(n * minSize)
	if err != nil {
		return nil, err
	}
	return fixedArray(elem, p, int(n))
}

func (d *decoder) takeFixed(t ValueType) ([]byte, error) {
	n := t.fixedSize()
	if n == 0 {
		return nil, fmt.Errorf("unknown value type %d", uint32(t))
	}
	return d.take(uint64(n))
}

func scalar(t ValueType, p []byte) (any, error) {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return p[0], nil
	case TypeInt8:
		return int8(p[0]), nil
	case TypeUint16:
		return le.Uint16(p), nil
	case TypeInt16:
		return int16(le.Uint16(p)), nil
	case TypeUint32:
		return le.Uint32(p), nil
	case TypeInt32:
		return int32(le.Uint32(p)), nil
	case TypeFloat32:
		return math.Float32frombits(le.Uint32(p)), nil
	case TypeBool:
		if p[0] > 1 {
			return nil, fmt.Errorf("bool value %d is not 0 or 1", p[0])
		}
		return p[0] == 1, nil
	case TypeUint64:
		return le.Uint64(p), nil
	case TypeInt64:
		return int64(le.Uint64(p)), nil
	case TypeFloat64:
		return math.Float64frombits(le.Uint64(p)), nil
	}
	return nil, fmt.Errorf("unknown value type %d", uint32(t))
}

// fixedArray decodes n packed scalars of type t.
func fixedArray(t ValueType, p []byte, n int) (any, error) {
	le := binary.LittleEndian
	var v any
	switch t {
	case TypeUint8:
		v = bytes.Clone(p[:n:n]) // a copy, never nil: the mapping may go away
	case TypeInt8:
		out := make([]int8, n)
		for i := range out {
			out[i] = int8(p[i])
		}
		v = out
	case TypeUint16:
		out := make([]uint16, n)
		for i := range out {
			out[i] = le.Uint16(p[2*i:])
		}
		v = out
	case TypeInt16:
		out := make([]int16, n)
		for i := range out {
			out[i] = int16(le.Uint16(p[2*i:]))
		}
		v = out
	case TypeUint32:
		out := make([]uint32, n)
		for i := range out {
			out[i] = le.Uint32(p[4*i:])
		}
		v = out
	case TypeInt32:
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(le.Uint32(p[4*i:]))
		}
		v = out
	case TypeFloat32:
		out := make([]float32, n)
		for i := range out {
			out[i] = math.Float32frombits(le.Uint32(p[4*i:]))
		}
		v = out
	case TypeBool:
		out := make([]bool, n)
		for i := range out {
			if p[i] > 1 {
				return nil, fmt.Errorf("array element %d: bool value %d is not 0 or 1", i, p[i])
			}
			out[i] = p[i] == 1
		}
		v = out
	case TypeUint64:
		out := make([]uint64, n)
		for i := range out {
			out[i] = le.Uint64(p[8*i:])
		}
		v = out
	case TypeInt64:
		out := make([]int64, n)
		for i := range out {
			out[i] = int64(le.Uint64(p[8*i:]))
		}
		v = out
	case TypeFloat64:
		out := make([]float64, n)
		for i := range out {
			out[i] = math.Float64frombits(le.Uint64(p[8*i:]))
		}
		v = out
	default:
		return nil, fmt.Errorf("unknown array element type %d", uint32(t))
	}
	return Array{t, v}, nil
}
