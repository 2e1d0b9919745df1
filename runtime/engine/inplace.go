package engine

import (
	"fmt"
	"os"
	"sort"
	"unsafe"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
)

// MappedSource is a WeightSource over a memory-mapped model file (a GGUF)
// whose tensors can be used where they lie.
type MappedSource interface {
	WeightSource
	// Mapping is the whole file, mapped read-only from a page boundary; it
	// must stay mapped while the model runs.
	Mapping() []byte
	// Mapped reports where a tensor's bytes lie in Mapping when they are
	// exactly what Read would write for format.
	Mapped(spec models.TensorSpec, format string) (offset, size int64, ok bool)
}

// WeightStats says how the trunk's weights were loaded.
type WeightStats struct {
	InPlace int64 // bytes used where they lie in the mapped file
	Copied  int64 // bytes copied into the weights buffer
	// Wrapped counts the mapped stretches wrapped without a copy; Staged
	// those the backend could not wrap (alignment) and that were copied to
	// aligned memory instead.
	Wrapped, Staged int
	// Why is set when nothing could be used in place.
	Why string
}

// mapStep: every mapped buffer starts on a GiB boundary of the file, so
// offsets within one stay far below 2^32 (what an ICB command records) and
// each buffer stays below a GPU's largest buffer.
const mapStep = 1 << 30

// pageAlign rounds mapped buffers: the largest page of the platforms we run
// on (16 KiB on Apple silicon).
const pageAlign = 16 << 10

// mappedChunk is one stretch of the mapped file backing a KindMapped buffer.
type mappedChunk struct {
	name       string
	start, end int64
	bytes      int64 // of the tensors in it
}

// inPlace is the plan: stretches of the file to wrap, and the tensors that
// live there.
type inPlace struct {
	mapping []byte
	chunks  []mappedChunk
	mapped  map[string]bool // tensor names
}

// planInPlace moves every trunk tensor whose bytes the file holds as the
// graph wants them into KindMapped buffers over the file, and compacts the
// rest of the weights buffer. It rewrites graphs in place; nil (with the
// reason) when nothing can move.
func planInPlace(c *models.Config, graphs []*graph.Graph, ms MappedSource) (*inPlace, string, error) {
	mapping := ms.Mapping()
	if len(mapping) == 0 {
		return nil, "the weight file is not mapped", nil
	}
	specs := map[string]models.TensorSpec{}
	for _, s := range c.Tensors() {
		specs[s.Name] = s
	}
	type cand struct {
		t       graph.Tensor
		size    int64
		fileOff int64
		inPlace bool
	}
	var cands []cand
	seen := map[string]bool{}
	for _, g := range graphs {
		for _, t := range g.Tensors {
			if t.Buffer != weightsBuffer || seen[t.Name] {
				continue
			}
			seen[t.Name] = true
			if t.Stride != 0 {
				return nil, fmt.Sprintf("tensor %s is stacked in the weights buffer", t.Name), nil
			}
			spec, ok := specs[t.Name]
			if !ok {
				return nil, "", fmt.Errorf("window graph places tensor %s, which model %s does not have", t.Name, c.Name)
			}
			f, err := quantFormat(t.Format)
			if err != nil {
				return nil, "", fmt.Errorf("tensor %s: %w", t.Name, err)
			}
			size := int64(spec.Elements()/t.Shape[len(t.Shape)-1]) * int64(f.Bytes(t.RowStored()))
			off, fsize, ok := ms.Mapped(spec, t.Format)
			// The kernels read tensors with vector loads from a 16-byte
			// aligned start (q4_k takes uint4s); a file with a smaller
			// general.alignment leaves such a tensor to be copied.
			aligned := off%tensorAlign == 0
			cands = append(cands, cand{t: t, size: size, fileOff: off, inPlace: ok && aligned && fsize == size && off+size <= int64(len(mapping))})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i].t.Offset < cands[j].t.Offset })
	var overlap int64
	for _, cd := range cands {
		if cd.inPlace {
			overlap = max(overlap, cd.size)
		}
	}
	if overlap == 0 {
		return nil, "no tensor of the file is stored as the window graphs read it", nil
	}
	overlap = roundUp(overlap, pageAlign)
	mappedLen := roundUp(int64(len(mapping)), int64(os.Getpagesize()))
	ip := &inPlace{mapping: unsafe.Slice(unsafe.SliceData(mapping), mappedLen), mapped: map[string]bool{}}
	chunkOf := map[int64]int{}
	var moves []graph.Move
	var compact int64
	for _, cd := range cands {
		from := graph.Range{Buffer: weightsBuffer, Offset: cd.t.Offset, Size: cd.size}
		if !cd.inPlace {
			compact = roundUp(compact, 256)
			moves = append(moves, graph.Move{From: from, To: graph.Range{Buffer: weightsBuffer, Offset: compact, Size: cd.size}})
			compact += cd.size
			continue
		}
		k := cd.fileOff / mapStep
		ci, ok := chunkOf[k]
		if !ok {
			ci = len(ip.chunks)
			chunkOf[k] = ci
			start := k * mapStep
			ip.chunks = append(ip.chunks, mappedChunk{name: fmt.Sprintf("weights.file%d", k), start: start, end: min(start+mapStep+overlap, mappedLen)})
		}
		ch := &ip.chunks[ci]
		moves = append(moves, graph.Move{From: from, To: graph.Range{Buffer: ch.name, Offset: cd.fileOff - ch.start, Size: cd.size}})
		ip.mapped[cd.t.Name] = true
		ch.bytes += cd.size
	}
	var add []graph.Buffer
	for _, ch := range ip.chunks {
		add = append(add, graph.Buffer{Name: ch.name, Kind: graph.KindMapped, Size: ch.end - ch.start})
	}
	// Relocate copies before it changes anything; apply to all graphs only
	// once every one has accepted the moves.
	clones := make([]graph.Graph, len(graphs))
	for i, g := range graphs {
		clones[i] = *g
		if err := graph.Relocate(&clones[i], moves, add); err != nil {
			return nil, fmt.Sprintf("%s window T=%d: %v", g.Kind, g.Rows, err), nil
		}
		for j := range clones[i].Buffers {
			if b := &clones[i].Buffers[j]; b.Name == weightsBuffer {
				b.Size = roundUp(compact, 256)
			}
		}
	}
	for i, g := range graphs {
		*g = clones[i]
	}
	return ip, "", nil
}

// tensorAlign is the alignment the kernels assume of a tensor's start.
const tensorAlign = 16

// weightsBuffer is the buffer the generator places the trunk's tensors in.
const weightsBuffer = "weights"

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }

// wrap hands each mapped stretch to the memory: in place, or, where the
// backend refuses the stretch (a device page larger than the OS's), a copy
// in aligned memory.
func (ip *inPlace) wrap(mem backend.Memory, st *WeightStats) error {
	w, ok := mem.(backend.MappedMemory)
	if !ok {
		return fmt.Errorf("memory of type %T cannot wrap mapped weights", mem)
	}
	for _, ch := range ip.chunks {
		host := ip.mapping[ch.start:ch.end]
		if err := w.Wrap(ch.name, host); err == nil {
			st.Wrapped++
			st.InPlace += ch.bytes
			continue
		}
		staged := backend.AlignedBytes(roundUp(ch.end-ch.start, pageAlign), pageAlign)
		copy(staged, host)
		if err := w.Wrap(ch.name, staged); err != nil {
			return fmt.Errorf("mapped weights %s: %w", ch.name, err)
		}
		st.Staged++
		st.Copied += ch.bytes
	}
	return nil
}

// Copying hides the mapping of src, so every weight is copied into the
// engine's buffers at load (for a file that must not stay open, or to
// compare against the in-place load).
func Copying(src WeightSource) WeightSource {
	if n, ok := src.(NgramSource); ok {
		return copyingNgram{src, n}
	}
	return copyingSource{src}
}

type copyingSource struct{ WeightSource }

func (copyingSource) copying() {}

type copyingNgram struct {
	WeightSource
	NgramSource
}

func (copyingNgram) copying() {}
