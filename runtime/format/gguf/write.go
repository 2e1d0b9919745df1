package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/models/quant"
)

// Writer streams a GGUF v3 file: Create writes the header (so every tensor's
// name, dims and type are fixed up front), then the tensor data follow in
// order through WriteTensor or Write, so a converter holds one tensor at a
// time. Everything goes to a temporary file in the target directory that
// Close renames into place: path is never left half-written.
type Writer struct {
	path    string
	tmp     *outfile.Temp
	w       *bufio.Writer
	tensors []TensorInfo
	align   int64
	cur     int   // index of the tensor being written
	written int64 // bytes of it written so far
	err     error // sticky: once writing failed, the file is abandoned
}

// Create validates the metadata and tensor infos, lays the tensors out
// (offsets aligned to general.alignment, default 32) and writes the header.
// The Offset and Size of the given infos are ignored and computed.
func Create(path string, kv []KV, tensors []TensorInfo) (*Writer, error) {
	header, infos, align, err := buildHeader(kv, tensors)
	if err != nil {
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	tmp, err := outfile.Create(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	w := &Writer{path: path, tmp: tmp, w: bufio.NewWriterSize(tmp, 1<<20), tensors: infos, align: align}
	if _, err := w.w.Write(header); err != nil {
		w.Abort()
		return nil, fmt.Errorf("gguf %s: %w", path, err)
	}
	return w, nil
}

// Tensors returns the tensor infos with their computed offsets and sizes.
func (w *Writer) Tensors() []TensorInfo { return w.tensors }

// WriteTensor writes the whole data of the next tensor, which must be called
// name and hold exactly its size. Zero-size tensors may be skipped.
func (w *Writer) WriteTensor(name string, data []byte) error {
	if w.err != nil {
		return w.err
	}
	// Move past finished tensors, and past empty ones unless this is one.
	for w.cur < len(w.tensors) && w.written == w.tensors[w.cur].Size && (w.written > 0 || w.tensors[w.cur].Name != name) {
		w.finish()
	}
	if w.cur >= len(w.tensors) {
		return w.fail(fmt.Errorf("tensor %s: every tensor is already written", name))
	}
	t := w.tensors[w.cur]
	if t.Name != name || w.written != 0 {
		return w.fail(fmt.Errorf("tensor %s written out of order: the next is %s (%d of %d bytes written)", name, t.Name, w.written, t.Size))
	}
	if int64(len(data)) != t.Size {
		return w.fail(fmt.Errorf("tensor %s: %d bytes of data, its dims %v of %s need %d", name, len(data), t.Dims, t.Type.Name, t.Size))
	}
	_, err := w.Write(data)
	return err
}

// Write appends p to the tensor data, tensor after tensor in order, padding
// between them as the alignment requires; a tensor may arrive in pieces.
func (w *Writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	n := 0
	for len(p) > 0 {
		for w.cur < len(w.tensors) && w.written == w.tensors[w.cur].Size {
			w.finish()
		}
		if w.err != nil {
			return n, w.err
		}
		if w.cur >= len(w.tensors) {
			return n, w.fail(fmt.Errorf("%d bytes of data beyond the last tensor", len(p)))
		}
		k := int(min(int64(len(p)), w.tensors[w.cur].Size-w.written))
		if _, err := w.w.Write(p[:k]); err != nil {
			return n, w.fail(err)
		}
		n += k
		w.written += int64(k)
		p = p[k:]
	}
	return n, nil
}

// finish pads the current (complete) tensor to the alignment and moves on.
func (w *Writer) finish() {
	t := w.tensors[w.cur]
	w.cur++
	w.written = 0
	if pad := alignUp(t.Size, w.align) - t.Size; pad > 0 && w.err == nil {
		if _, err := w.w.Write(make([]byte, pad)); err != nil {
			w.fail(err)
		}
	}
}

func (w *Writer) fail(err error) error {
	if w.err == nil {
		w.err = fmt.Errorf("gguf %s: %w", w.path, err)
	}
	return w.err
}

// Close checks every tensor was written in full, then syncs the temporary
// file and renames it to the target path. On any error nothing is left.
func (w *Writer) Close() error {
	for w.err == nil && w.cur < len(w.tensors) && w.written == w.tensors[w.cur].Size {
		w.finish()
	}
	if w.err == nil && w.cur < len(w.tensors) {
		t := w.tensors[w.cur]
		w.fail(fmt.Errorf("tensor %s incomplete: %d of %d bytes written", t.Name, w.written, t.Size))
	}
	if w.err == nil {
		if err := w.w.Flush(); err != nil {
			w.fail(err)
		}
	}
	if w.err != nil {
		w.Abort()
		return w.err
	}
	tmp := w.tmp
	w.tmp = nil
	if err := tmp.Commit(); err != nil {
		return w.fail(err)
	}
	w.err = errors.New("gguf: writer already closed")
	return nil
}

// Abort discards the temporary file; the target path is untouched.
func (w *Writer) Abort() {
	if w.tmp == nil {
		return
	}
	w.tmp.Abort()
	w.tmp = nil
	if w.err == nil {
		w.err = errors.New("gguf: writer aborted")
	}
}

// WriteFile writes a whole GGUF file from tensors held in memory; the infos'
// offsets and sizes are computed, and each Data must match its dims and type.
func WriteFile(path string, kv []KV, tensors []Tensor) error {
	infos := make([]TensorInfo, len(tensors))
	for i, t := range tensors {
		infos[i] = t.TensorInfo
	}
	w, err := Create(path, kv, infos)
	if err != nil {
		return err
	}
	for _, t := range tensors {
		if err := w.WriteTensor(t.Name, t.Data); err != nil {
			w.Abort()
			return err
		}
	}
	return w.Close()
}

// buildHeader encodes the header, metadata and tensor infos, and returns the
// infos with their offsets and sizes.
func buildHeader(kv []KV, tensors []TensorInfo) ([]byte, []TensorInfo, int64, error) {
	var b bytes.Buffer
	le := binary.LittleEndian
	put32 := func(v uint32) { b.Write(le.AppendUint32(nil, v)) }
	put64 := func(v uint64) { b.Write(le.AppendUint64(nil, v)) }
	putStr := func(s string) { put64(uint64(len(s))); b.WriteString(s) }

	put32(Magic)
	put32(Version)
	put64(uint64(len(tensors)))
	put64(uint64(len(kv)))

	align := int64(DefaultAlignment)
	seen := map[string]bool{}
	for _, p := range kv {
		if seen[p.Key] {
			return nil, nil, 0, fmt.Errorf("metadata key %s given twice", p.Key)
		}
		seen[p.Key] = true
		if p.Key == KeyAlignment {
			a, ok := p.Value.(uint32)
			if !ok || a == 0 || a&(a-1) != 0 {
				return nil, nil, 0, fmt.Errorf("metadata key %s must be a uint32 power of two, got %T %v", KeyAlignment, p.Value, p.Value)
			}
			align = int64(a)
		}
		t, err := TypeOf(p.Value)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("metadata key %s: %w", p.Key, err)
		}
		putStr(p.Key)
		put32(uint32(t))
		if err := encodeValue(&b, p.Value, 0); err != nil {
			return nil, nil, 0, fmt.Errorf("metadata key %s: %w", p.Key, err)
		}
	}

	infos := make([]TensorInfo, len(tensors))
	names := map[string]bool{}
	var off int64
	for i, t := range tensors {
		if t.Name == "" || len(t.Name) > MaxNameLen {
			return nil, nil, 0, fmt.Errorf("tensor name %q: want 1 to %d bytes", t.Name, MaxNameLen)
		}
		if names[t.Name] {
			return nil, nil, 0, fmt.Errorf("tensor %s given twice", t.Name)
		}
		names[t.Name] = true
		known, err := quant.GGMLTypeByCode(t.Type.Code)
		if err != nil || known != t.Type {
			return nil, nil, 0, fmt.Errorf("tensor %s: type %+v is not a ggml type (use quant.GGMLTypeByCode)", t.Name, t.Type)
		}
		size, err := tensorSize(t.Dims, t.Type)
		if err != nil {
			return nil, nil, 0, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		infos[i] = TensorInfo{Name: t.Name, Dims: append([]uint64(nil), t.Dims...), Type: t.Type, Offset: off, Size: size}
		putStr(t.Name)
		put32(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			put64(d)
		}
		put32(uint32(t.Type.Code))
		put64(uint64(off))
		if size > math.MaxInt64-off-align {
			return nil, nil, 0, fmt.Errorf("tensor %s: data section overflows int64", t.Name)
		}
		off = alignUp(off+size, align)
	}
	b.Write(make([]byte, alignUp(int64(b.Len()), align)-int64(b.Len())))
	return b.Bytes(), infos, align, nil
}

// encodeValue writes v (no type tag: the caller wrote it).
func encodeValue(b *bytes.Buffer, v any, depth int) error {
	le := binary.LittleEndian
	switch x := v.(type) {
	case uint8:
		b.WriteByte(x)
	case int8:
		b.WriteByte(byte(x))
	case uint16:
		b.Write(le.AppendUint16(nil, x))
	case int16:
		b.Write(le.AppendUint16(nil, uint16(x)))
	case uint32:
		b.Write(le.AppendUint32(nil, x))
	case int32:
		b.Write(le.AppendUint32(nil, uint32(x)))
	case float32:
		b.Write(le.AppendUint32(nil, math.Float32bits(x)))
	case bool:
		if x {
			b.WriteByte(1)
		} else {
			b.WriteByte(0)
		}
	case string:
		b.Write(le.AppendUint64(nil, uint64(len(x))))
		b.WriteString(x)
	case uint64:
		b.Write(le.AppendUint64(nil, x))
	case int64:
		b.Write(le.AppendUint64(nil, uint64(x)))
	case float64:
		b.Write(le.AppendUint64(nil, math.Float64bits(x)))
	case Array:
		if depth >= maxArrayDepth {
			return fmt.Errorf("arrays nested more than %d deep", maxArrayDepth)
		}
		if err := checkArray(x); err != nil {
			return err
		}
		b.Write(le.AppendUint32(nil, uint32(x.Elem)))
		b.Write(le.AppendUint64(nil, uint64(x.Len())))
		return encodeElems(b, x, depth)
	default:
		return fmt.Errorf("%T is not a GGUF metadata type", v)
	}
	return nil
}

// checkArray verifies that Values is the slice type Elem calls for.
func checkArray(a Array) error {
	ok := false
	switch a.Values.(type) {
	case []uint8:
		ok = a.Elem == TypeUint8
	case []int8:
		ok = a.Elem == TypeInt8
	case []uint16:
		ok = a.Elem == TypeUint16
	case []int16:
		ok = a.Elem == TypeInt16
	case []uint32:
		ok = a.Elem == TypeUint32
	case []int32:
		ok = a.Elem == TypeInt32
	case []float32:
		ok = a.Elem == TypeFloat32
	case []bool:
		ok = a.Elem == TypeBool
	case []string:
		ok = a.Elem == TypeString
	case []uint64:
		ok = a.Elem == TypeUint64
	case []int64:
		ok = a.Elem == TypeInt64
	case []float64:
		ok = a.Elem == TypeFloat64
	case []Array:
		ok = a.Elem == TypeArray
	}
	if !ok {
		return fmt.Errorf("array of %s holds a %T", a.Elem, a.Values)
	}
	return nil
}

func encodeElems(b *bytes.Buffer, a Array, depth int) error {
	switch vs := a.Values.(type) {
	case []uint8:
		b.Write(vs)
		return nil
	case []Array:
		for i, e := range vs { // nested arrays carry no per-element tag
			if err := encodeValue(b, e, depth+1); err != nil {
				return fmt.Errorf("array element %d: %w", i, err)
			}
		}
		return nil
	}
	// The scalar element types: encode each without its tag.
	var err error
	forEach(a.Values, func(v any) {
		if err == nil {
			err = encodeValue(b, v, depth+1)
		}
	})
	return err
}

func forEach(vs any, fn func(any)) {
	switch s := vs.(type) {
	case []int8:
		for _, v := range s {
			fn(v)
		}
	case []uint16:
		for _, v := range s {
			fn(v)
		}
	case []int16:
		for _, v := range s {
			fn(v)
		}
	case []uint32:
		for _, v := range s {
			fn(v)
		}
	case []int32:
		for _, v := range s {
			fn(v)
		}
	case []float32:
		for _, v := range s {
			fn(v)
		}
	case []bool:
		for _, v := range s {
			fn(v)
		}
	case []string:
		for _, v := range s {
			fn(v)
		}
	case []uint64:
		for _, v := range s {
			fn(v)
		}
	case []int64:
		for _, v := range s {
			fn(v)
		}
	case []float64:
		for _, v := range s {
			fn(v)
		}
	}
}
