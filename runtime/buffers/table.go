package buffers

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
)

// Table is a model's named buffers in declaration order, for backends that
// allocate the bytes themselves (cuda, mslemu): it answers the engine's reads
// and writes of them between windows. The backend fills the fields; Index maps
// a name to its position in the others.
type Table struct {
	Names []string
	Kinds []string
	Bufs  [][]byte
	Index map[string]int
}

// Bytes returns the bytes of a range, capacity clipped to it.
func (t *Table) Bytes(r graph.Range) ([]byte, error) {
	i, ok := t.Index[r.Buffer]
	if !ok {
		return nil, fmt.Errorf("no buffer %q", r.Buffer)
	}
	b := t.Bufs[i]
	if r.Size == 0 && r.Offset == 0 {
		return b, nil // a binding of a buffer sized at run time (the expert arena)
	}
	if r.Offset < 0 || r.Size < 0 || r.End() > int64(len(b)) {
		return nil, fmt.Errorf("range [%d,%d) outside buffer %q of %d bytes", r.Offset, r.End(), r.Buffer, len(b))
	}
	return b[r.Offset:r.End():r.End()], nil
}

// Buffer returns a whole buffer (nil for one no graph declares).
func (t *Table) Buffer(name string) []byte {
	if i, ok := t.Index[name]; ok {
		return t.Bufs[i]
	}
	return nil
}

// Clear zeroes every buffer of a kind.
func (t *Table) Clear(kind string) {
	for i, k := range t.Kinds {
		if k == kind {
			clear(t.Bufs[i])
		}
	}
}

// Snapshot copies every buffer of a kind into dst (reused when large
// enough) and returns it; Restore puts such a copy back.
func (t *Table) Snapshot(kind string, dst map[string][]byte) map[string][]byte {
	if dst == nil {
		dst = map[string][]byte{}
	}
	for i, k := range t.Kinds {
		if k == kind {
			dst[t.Names[i]] = append(dst[t.Names[i]][:0], t.Bufs[i]...)
		}
	}
	return dst
}

// Restore copies a snapshot back.
func (t *Table) Restore(snap map[string][]byte) {
	for name, b := range snap {
		copy(t.Buffer(name), b)
	}
}
