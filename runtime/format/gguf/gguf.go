// Package gguf reads and writes GGUF files, the container llama.cpp and ggml
// use: a header, typed metadata key/value pairs, tensor infos (name, ne dims
// innermost first, ggml type, offset) and an aligned data section. Files are
// memory-mapped, so a Tensor's Data is a view of the mapping, valid until
// Close. Reading accepts versions 2 and 3 (they share one layout); writing
// produces version 3. Everything is little-endian.
//
// Layout reference: ../shared/specs/ggml_formats.md §10 (ggml docs/gguf.md,
// src/gguf.cpp).
package gguf

import (
	"fmt"
	"math"

	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/mmap"
)

// Magic is "GGUF" read as a little-endian uint32.
const Magic = 0x46554747

// Version is the version this package writes.
const Version = 3

// DefaultAlignment applies when general.alignment is absent.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that overrides the data alignment.
const KeyAlignment = "general.alignment"

// MaxNameLen is the longest tensor name ggml accepts (GGML_MAX_NAME 64, less
// the terminating NUL).
const MaxNameLen = 63

// MaxDims is GGML_MAX_DIMS.
const MaxDims = 4

// ValueType is the type tag of a metadata value.
type ValueType uint32

// The metadata value types, with their GGUF ids.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var typeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type %d", uint32(t))
}

// fixedSize is the encoded size of a scalar type, 0 for string and array.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// Array is an array value. Values is a slice of the Go type of Elem:
// []uint8, []int8, []uint16, []int16, []uint32, []int32, []float32, []bool,
// []string, []uint64, []int64, []float64, or []Array for nested arrays.
type Array struct {
	Elem   ValueType
	Values any
}

// Len is the number of elements.
func (a Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []float32:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float64:
		return len(v)
	case []Array:
		return len(v)
	}
	return 0
}

// KV is one metadata pair. Value holds a uint8, int8, uint16, int16, uint32,
// int32, float32, bool, string, uint64, int64, float64 or Array; its Go type
// decides the GGUF type written.
type KV struct {
	Key   string
	Value any
}

// TypeOf returns the GGUF type of a metadata value, or an error for a Go
// type GGUF has no tag for.
func TypeOf(v any) (ValueType, error) {
	switch v.(type) {
	case uint8:
		return TypeUint8, nil
	case int8:
		return TypeInt8, nil
	case uint16:
		return TypeUint16, nil
	case int16:
		return TypeInt16, nil
	case uint32:
		return TypeUint32, nil
	case int32:
		return TypeInt32, nil
	case float32:
		return TypeFloat32, nil
	case bool:
		return TypeBool, nil
	case string:
		return TypeString, nil
	case Array:
		return TypeArray, nil
	case uint64:
		return TypeUint64, nil
	case int64:
		return TypeInt64, nil
	case float64:
		return TypeFloat64, nil
	}
	return 0, fmt.Errorf("%T is not a GGUF metadata type", v)
}

// TensorInfo describes one tensor: its name, ne (innermost first, as ggml
// counts: a torch [rows, cols] matrix has Dims [cols, rows]), ggml type, and
// byte range inside the data section.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   quant.GGMLType
	Offset int64 // from the start of the data section
	Size   int64
}

// Elements is the product of the dims.
func (t TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range t.Dims {
		n *= int64(d)
	}
	return n
}

// Shape is the dims outermost first, the order torch and our TensorSpecs use.
func (t TensorInfo) Shape() []int {
	s := make([]int, len(t.Dims))
	for i, d := range t.Dims {
		s[len(s)-1-i] = int(d)
	}
	return s
}

// RowBytes is the size of one innermost row (ne0 elements).
func (t TensorInfo) RowBytes() int64 {
	return int64(t.Dims[0]) / int64(t.Type.BlockElems) * int64(t.Type.BlockBytes)
}

// Tensor is a tensor with its data, a view of the file mapping.
type Tensor struct {
	TensorInfo
	Data []byte
}

// File is a parsed GGUF file.
type File struct {
	Path      string
	Version   uint32
	Alignment int64
	// KV is the metadata in file order; Tensors the tensor infos in file order.
	KV      []KV
	Tensors []TensorInfo
	// DataOffset is where the data section starts in the file.
	DataOffset int64

	kvIndex map[string]int
	tIndex  map[string]int
	data    []byte // the data section
	mapping []byte // the whole file when mapped (nil when parsed from memory)
	closed  bool
}

// Value returns the metadata value for key.
func (f *File) Value(key string) (any, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return nil, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the named tensor with its data (false after Close).
func (f *File) Tensor(name string) (Tensor, bool) {
	i, ok := f.tIndex[name]
	if !ok || f.closed {
		return Tensor{}, false
	}
	ti := f.Tensors[i]
	return Tensor{ti, f.data[ti.Offset : ti.Offset+ti.Size : ti.Offset+ti.Size]}, true
}

// Has reports whether the file has a tensor called name.
func (f *File) Has(name string) bool {
	_, ok := f.tIndex[name]
	return ok
}

func (f *File) lookup(key string) (any, error) {
	v, ok := f.Value(key)
	if !ok {
		return nil, fmt.Errorf("gguf %s: metadata key %s missing", f.Path, key)
	}
	return v, nil
}

func (f *File) wrongType(key string, v any, want string) error {
	t, _ := TypeOf(v)
	return fmt.Errorf("gguf %s: metadata key %s is a %s, want %s", f.Path, key, t, want)
}

// String returns a string value.
func (f *File) String(key string) (string, error) {
	v, err := f.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", f.wrongType(key, v, "a string")
	}
	return s, nil
}

// Uint returns a value of any integer type that is not negative; writers
// differ in the integer width they use for counts.
func (f *File) Uint(key string) (uint64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	u, ok := asUint(v)
	if !ok {
		return 0, f.wrongType(key, v, "a non-negative integer")
	}
	return u, nil
}

func asUint(v any) (uint64, bool) {
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// Float returns a float32 or float64 value.
func (f *File) Float(key string) (float64, error) {
	v, err := f.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, f.wrongType(key, v, "a float")
}

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, error) {
	v, err := f.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, f.wrongType(key, v, "a bool")
	}
	return b, nil
}

// Array returns an array value.
func (f *File) Array(key string) (Array, error) {
	v, err := f.lookup(key)
	if err != nil {
		return Array{}, err
	}
	a, ok := v.(Array)
	if !ok {
		return Array{}, f.wrongType(key, v, "an array")
	}
	return a, nil
}

// Mapping is the whole file as mapped (page-aligned, read-only), nil when
// the file was parsed from memory or is closed. A tensor's bytes start at
// DataOffset + its Offset.
func (f *File) Mapping() []byte { return f.mapping }

// Close unmaps the file; Data of its tensors must not be used afterwards.
func (f *File) Close() error {
	m := f.mapping
	f.mapping, f.data, f.closed = nil, nil, true
	if err := mmap.Unmap(m); err != nil {
		return fmt.Errorf("gguf %s: munmap: %w", f.Path, err)
	}
	return nil
}

// alignUp rounds o up to a multiple of a (a power of two).
func alignUp(o, a int64) int64 { return (o + a - 1) &^ (a - 1) }

// tensorSize computes the byte size of a tensor of the given dims and type,
// checking ne0 against the block size and every product against overflow.
func tensorSize(dims []uint64, t quant.GGMLType) (int64, error) {
	if len(dims) == 0 || len(dims) > MaxDims {
		return 0, fmt.Errorf("%d dims (want 1 to %d)", len(dims), MaxDims)
	}
	for _, d := range dims {
		if d > math.MaxInt64 {
			return 0, fmt.Errorf("dims %v: a dimension overflows int64", dims)
		}
	}
	row, err := t.RowBytes(int64(dims[0]))
	if err != nil {
		return 0, fmt.Errorf("dims %v: %w", dims, err)
	}
	size := row
	for _, d := range dims[1:] {
		if d != 0 && size > math.MaxInt64/int64(d) {
			return 0, fmt.Errorf("dims %v of %s: size overflows int64", dims, t.Name)
		}
		size *= int64(d)
	}
	return size, nil
}
