// Package safetensors reads and writes the safetensors format: an 8-byte
// little-endian header length, a JSON header mapping tensor names to dtype,
// shape and byte range, then the raw little-endian data. Files are
// memory-mapped, so opening a checkpoint far larger than RAM is cheap and a
// Tensor's Data is a view of the mapping, valid until Close. A FILE absent
// but for FILE.planes (the vendored checkpoints, runtime/format/planes) is
// decoded into memory instead.
package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/mmap"
	"github.com/strata-llm/strata/runtime/format/planes"
)

// maxHeader bounds the JSON header: real headers are a few MiB at most, and a
// bigger value means the file is not safetensors (or is corrupt).
const maxHeader = 100 << 20

// metadataKey is the reserved header entry holding string → string metadata.
const metadataKey = "__metadata__"

// dtypeSizes gives the element size of every dtype we accept.
var dtypeSizes = map[string]int{
	"F64": 8, "F32": 4, "F16": 2, "BF16": 2,
	"I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
}

// DTypeSize returns the size in bytes of one element of dtype, or 0 and false
// when the dtype is not supported.
func DTypeSize(dtype string) (int, bool) {
	n, ok := dtypeSizes[dtype]
	return n, ok
}

// Tensor is one tensor of a file. Data is little-endian, row-major, and (when
// it came from Open) a slice of the file mapping: do not write to it, and do
// not use it after the File is closed.
type Tensor struct {
	Name  string
	DType string
	Shape []int
	Data  []byte
}

// Elements is the product of the shape (1 for a scalar).
func (t Tensor) Elements() int {
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Float32s decodes F32, F16, BF16 or F64 data into a new slice.
func (t Tensor) Float32s() ([]float32, error) {
	n := t.Elements()
	if err := t.checkLen(n); err != nil {
		return nil, err
	}
	out := make([]float32, n)
	switch t.DType {
	case "F32":
		mustLookup("f32").Decode(t.Data, out)
	case "F16":
		mustLookup("f16").Decode(t.Data, out)
	case "BF16":
		mustLookup("bf16").Decode(t.Data, out)
	case "F64":
		for i := range out {
			out[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(t.Data[8*i:])))
		}
	default:
		return nil, fmt.Errorf("tensor %s: cannot decode dtype %s as float32", t.Name, t.DType)
	}
	return out, nil
}

// Int32s decodes integer data (I32, I64 with a range check, I16, I8, U8) into
// a new slice.
func (t Tensor) Int32s() ([]int32, error) {
	n := t.Elements()
	if err := t.checkLen(n); err != nil {
		return nil, err
	}
	out := make([]int32, n)
	switch t.DType {
	case "I32":
		for i := range out {
			out[i] = int32(binary.LittleEndian.Uint32(t.Data[4*i:]))
		}
	case "I64":
		for i := range out {
			v := int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
			if v < math.MinInt32 || v > math.MaxInt32 {
				return nil, fmt.Errorf("tensor %s: element %d = %d does not fit in int32", t.Name, i, v)
			}
			out[i] = int32(v)
		}
	case "I16":
		for i := range out {
			out[i] = int32(int16(binary.LittleEndian.Uint16(t.Data[2*i:])))
		}
	case "I8":
		for i := range out {
			out[i] = int32(int8(t.Data[i]))
		}
	case "U8":
		for i := range out {
			out[i] = int32(t.Data[i])
		}
	default:
		return nil, fmt.Errorf("tensor %s: cannot decode dtype %s as int32", t.Name, t.DType)
	}
	return out, nil
}

// Int64s decodes I64 and I32 data to int64 (HF stores the n-gram hash
// parameters as int64 and they exceed 32 bits).
func (t Tensor) Int64s() ([]int64, error) {
	n := t.Elements()
	if err := t.checkLen(n); err != nil {
		return nil, err
	}
	out := make([]int64, n)
	switch t.DType {
	case "I64":
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
		}
	case "I32":
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(t.Data[4*i:])))
		}
	default:
		return nil, fmt.Errorf("tensor %s: cannot decode dtype %s as int64", t.Name, t.DType)
	}
	return out, nil
}

// checkLen guards the decoders against a hand-built Tensor whose Data does
// not match its shape (tensors from Open are validated already).
func (t Tensor) checkLen(n int) error {
	size, ok := dtypeSizes[t.DType]
	if !ok {
		return fmt.Errorf("tensor %s: unknown dtype %q", t.Name, t.DType)
	}
	if len(t.Data) != n*size {
		return fmt.Errorf("tensor %s: %d bytes of data for shape %v of %s (want %d)", t.Name, len(t.Data), t.Shape, t.DType, n*size)
	}
	return nil
}

func mustLookup(name string) *quant.Format {
	f, err := quant.Lookup(name)
	if err != nil {
		panic(err) // the plain float formats are always registered
	}
	return f
}

// File is one open safetensors file.
type File struct {
	path     string
	mapping  []byte
	decoded  bool // mapping is a decoded FILE.planes in memory, not a mapping
	tensors  map[string]Tensor
	metadata map[string]string
}

// headerEntry is one tensor's entry in the JSON header.
type headerEntry struct {
	DType       string  `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Open memory-maps path read-only and validates its header completely, so
// every later Tensor lookup is safe to slice.
func Open(path string) (*File, error) {
	if planes.Encoded(path) {
		// Mapped from the decoded-file cache, else decoded into memory.
		if cached, err := planes.CachedOSFile(path); err != nil {
			return nil, fmt.Errorf("safetensors: %w", err)
		} else if cached != "" {
			return openMapped(path, cached)
		}
		data, err := planes.ReadOSFile(path)
		if err != nil {
			return nil, fmt.Errorf("safetensors: %w", err)
		}
		if len(data) < 8 {
			return nil, fmt.Errorf("safetensors %s: %d bytes, shorter than the 8-byte header length: truncated or not a safetensors file", path, len(data))
		}
		file := &File{path: path, mapping: data, decoded: true}
		if err := file.parse(); err != nil {
			return nil, err
		}
		return file, nil
	}
	return openMapped(path, path)
}

// openMapped maps file and parses it as path.
func openMapped(path, file string) (*File, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	defer f.Close() // the mapping outlives the descriptor
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("safetensors %s is not a regular file", path)
	}
	if st.Size() > math.MaxInt {
		return nil, fmt.Errorf("safetensors %s: file of %d bytes is too large to map", path, st.Size())
	}
	size := int(st.Size())
	if size < 8 {
		return nil, fmt.Errorf("safetensors %s: %d bytes, shorter than the 8-byte header length: truncated or not a safetensors file", path, size)
	}
	m, err := mmap.Map(f, size)
	if err != nil {
		return nil, fmt.Errorf("safetensors %s: mmap: %w", path, err)
	}
	mapped := &File{path: path, mapping: m}
	if err := mapped.parse(); err != nil {
		mmap.Unmap(m)
		return nil, err
	}
	return mapped, nil
}

func (f *File) parse() error {
	m := f.mapping
	hlen := binary.LittleEndian.Uint64(m[:8])
	if hlen > maxHeader || hlen > uint64(len(m)-8) {
		return fmt.Errorf("safetensors %s: header length %d but the file has %d bytes after it: truncated or not a safetensors file", f.path, hlen, len(m)-8)
	}
	header := m[8 : 8+hlen]
	data := m[8+hlen:]

	var raw map[string]json.RawMessage
	if err := json.Unmarshal(header, &raw); err != nil {
		return fmt.Errorf("safetensors %s: bad JSON header: %w", f.path, err)
	}
	type named struct {
		name string
		e    headerEntry
	}
	entries := make([]named, 0, len(raw))
	for name, msg := range raw {
		if name == metadataKey {
			if err := json.Unmarshal(msg, &f.metadata); err != nil {
				return fmt.Errorf("safetensors %s: %s must map strings to strings: %w", f.path, metadataKey, err)
			}
			continue
		}
		var e headerEntry
		if err := json.Unmarshal(msg, &e); err != nil {
			return fmt.Errorf("safetensors %s: tensor %s: bad header entry: %w", f.path, name, err)
		}
		entries = append(entries, named{name, e})
	}
	// Check in data order, so a truncated file names the first tensor cut off
	// (and the same one on every run).
	begin := func(e headerEntry) int64 {
		if len(e.DataOffsets) > 0 {
			return e.DataOffsets[0]
		}
		return -1
	}
	sort.Slice(entries, func(i, j int) bool {
		bi, bj := begin(entries[i].e), begin(entries[j].e)
		if bi != bj {
			return bi < bj
		}
		return entries[i].name < entries[j].name
	})
	f.tensors = make(map[string]Tensor, len(entries))
	for _, ne := range entries {
		t, err := checkEntry(ne.name, ne.e, len(data))
		if err != nil {
			return fmt.Errorf("safetensors %s: %w", f.path, err)
		}
		t.Data = data[ne.e.DataOffsets[0]:ne.e.DataOffsets[1]:ne.e.DataOffsets[1]]
		f.tensors[ne.name] = t
	}
	return nil
}

// checkEntry validates one header entry against the data section size and
// returns the tensor without its data.
func checkEntry(name string, e headerEntry, dataLen int) (Tensor, error) {
	size, ok := dtypeSizes[e.DType]
	if !ok {
		return Tensor{}, fmt.Errorf("tensor %s: unknown dtype %q", name, e.DType)
	}
	if e.Shape == nil {
		return Tensor{}, fmt.Errorf("tensor %s: no shape", name)
	}
	if len(e.DataOffsets) != 2 || e.DataOffsets[0] < 0 || e.DataOffsets[0] > e.DataOffsets[1] {
		return Tensor{}, fmt.Errorf("tensor %s: data_offsets %v is not [begin, end] with 0 ≤ begin ≤ end", name, e.DataOffsets)
	}
	begin, end := e.DataOffsets[0], e.DataOffsets[1]
	if end > int64(dataLen) {
		return Tensor{}, fmt.Errorf("file truncated: tensor %s needs bytes [%d,%d) but the data section has %d", name, begin, end, dataLen)
	}
	shape := make([]int, len(e.Shape))
	zero := false
	for i, d := range e.Shape {
		if d < 0 {
			return Tensor{}, fmt.Errorf("tensor %s: negative dimension in shape %v", name, e.Shape)
		}
		zero = zero || d == 0
		shape[i] = int(d)
	}
	elems := int64(0)
	if !zero {
		// Bound the product by the data section so it cannot overflow: a tensor
		// never has more elements than the data section has bytes.
		elems = 1
		for _, d := range e.Shape {
			if elems > int64(dataLen)/d {
				return Tensor{}, fmt.Errorf("tensor %s: shape %v of %s needs more bytes than the data section has (%d)", name, e.Shape, e.DType, dataLen)
			}
			elems *= d
		}
	}
	if want := elems * int64(size); end-begin != want {
		return Tensor{}, fmt.Errorf("tensor %s: shape %v of %s needs %d bytes but data_offsets [%d,%d) hold %d", name, e.Shape, e.DType, want, begin, end, end-begin)
	}
	return Tensor{Name: name, DType: e.DType, Shape: shape}, nil
}

// Path is the file's path as given to Open.
func (f *File) Path() string { return f.path }

// Metadata is the header's __metadata__ map (nil when absent).
func (f *File) Metadata() map[string]string { return f.metadata }

// Names lists the tensor names, sorted.
func (f *File) Names() []string {
	out := make([]string, 0, len(f.tensors))
	for n := range f.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Tensor returns the named tensor; its Data is a view of the mapping.
func (f *File) Tensor(name string) (Tensor, bool) {
	t, ok := f.tensors[name]
	return t, ok
}

// Close unmaps the file; Data of its tensors must not be used afterwards.
func (f *File) Close() error {
	m, decoded := f.mapping, f.decoded
	f.mapping, f.tensors = nil, nil
	if decoded {
		return nil
	}
	if err := mmap.Unmap(m); err != nil {
		return fmt.Errorf("safetensors %s: munmap: %w", f.path, err)
	}
	return nil
}
