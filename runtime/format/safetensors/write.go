package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"

	"github.com/strata-llm/strata/internal/outfile"
)

// WriteFile writes tensors (in the given order, packed back to back as the
// format requires: the reference reader rejects gaps) and metadata to path.
// It writes a temporary file in the same directory and renames it into place,
// so path is never left half-written.
func WriteFile(path string, tensors []Tensor, metadata map[string]string) (err error) {
	header, err := buildHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("safetensors %s: %w", path, err)
	}

	tmp, err := outfile.Create(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	defer tmp.Abort() // after Commit: nothing to do

	w := bufio.NewWriterSize(tmp, 1<<20)
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(header)))
	if _, err = w.Write(lenBuf[:]); err != nil {
		return fmt.Errorf("safetensors %s: %w", path, err)
	}
	if _, err = w.Write(header); err != nil {
		return fmt.Errorf("safetensors %s: %w", path, err)
	}
	for _, t := range tensors {
		if _, err = w.Write(t.Data); err != nil {
			return fmt.Errorf("safetensors %s: tensor %s: %w", path, t.Name, err)
		}
	}
	if err = w.Flush(); err != nil {
		return fmt.Errorf("safetensors %s: %w", path, err)
	}
	if err = tmp.Commit(); err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	return nil
}

// buildHeader validates the tensors and returns the JSON header, padded with
// spaces so the data section starts 8-byte aligned.
func buildHeader(tensors []Tensor, metadata map[string]string) ([]byte, error) {
	entries := make(map[string]any, len(tensors)+1)
	if len(metadata) > 0 {
		entries[metadataKey] = metadata
	}
	var offset int64
	for _, t := range tensors {
		if t.Name == "" || t.Name == metadataKey {
			return nil, fmt.Errorf("invalid tensor name %q", t.Name)
		}
		if _, dup := entries[t.Name]; dup {
			return nil, fmt.Errorf("tensor %s appears twice", t.Name)
		}
		for _, d := range t.Shape {
			if d < 0 {
				return nil, fmt.Errorf("tensor %s: negative dimension in shape %v", t.Name, t.Shape)
			}
		}
		if err := t.checkLen(t.Elements()); err != nil {
			return nil, err
		}
		shape := t.Shape
		if shape == nil {
			shape = []int{} // a scalar: JSON [] not null
		}
		end := offset + int64(len(t.Data))
		entries[t.Name] = struct {
			DType       string   `json:"dtype"`
			Shape       []int    `json:"shape"`
			DataOffsets [2]int64 `json:"data_offsets"`
		}{t.DType, shape, [2]int64{offset, end}}
		offset = end
	}
	// encoding/json sorts map keys, which makes the output deterministic.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(entries); err != nil {
		return nil, fmt.Errorf("encoding header: %w", err)
	}
	h := bytes.TrimRight(buf.Bytes(), "\n")
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	return h, nil
}
