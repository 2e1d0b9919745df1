package gen

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
)

// Buffer names of every window graph.
const (
	BufWeights = "weights"
	BufExperts = "experts"
	BufState   = "state"
	BufAct     = "act"
	BufParams  = "params"
	// BufState holds the rolling state a window advances in place (conv
	// windows, GDN recurrent state); BufKV the caches indexed by position (KV,
	// indexer keys), which a rejected draft row never needs undone: its rows
	// are overwritten before anything reads them.
	BufKV = "kv"
	// BufMTPHidden carries the trunk's final hidden rows to the MTP head's
	// window; BufMTPState holds the MTP layer's own KV and index caches.
	BufMTPHidden = "mtp_hidden"
	BufMTPState  = "mtp_state"
	BufMTPKV     = "mtp_kv"
)

// align is the alignment of every region: enough for any vector load and a
// multiple of every element size.
const align = 256

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }

// arena hands out aligned regions of one buffer in order.
type arena struct {
	name string
	size int64
}

func (a *arena) alloc(bytes int64) graph.Range {
	off := roundUp(a.size, align)
	a.size = off + bytes
	return graph.Range{Buffer: a.name, Offset: off, Size: bytes}
}

func (a *arena) buffer(kind string) graph.Buffer {
	return graph.Buffer{Name: a.name, Kind: kind, Size: roundUp(a.size, align)}
}

// weightLayout places every weight role: trunk, embeddings and head in the
// weights buffer; routed experts in the experts buffer, one contiguous block
// per (layer, expert) holding gate, up and down together, so one expert is one
// read when it streams from SSD.
type weightLayout struct {
	tensors []graph.Tensor
	byName  map[string]int
	weights arena
	experts arena
}

func layoutWeights(c *models.Config) (*weightLayout, error) {
	w := &weightLayout{byName: map[string]int{}, weights: arena{name: BufWeights}, experts: arena{name: BufExperts}}
	specs := c.Tensors()
	for i := 0; i < len(specs); i++ {
		s := specs[i]
		if s.Host() {
			continue // gathered by the host, never in a device buffer
		}
		f, err := quant.Lookup(s.Format(c.Quant))
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", s.Name, err)
		}
		if s.Class != models.ClassExperts {
			if s.Shape[len(s.Shape)-1]%f.BlockElems != 0 {
				return nil, fmt.Errorf("tensor %s: row length %d is not a multiple of the %s block size %d", s.Name, s.Shape[len(s.Shape)-1], f.Name, f.BlockElems)
			}
			r := w.weights.alloc(int64(f.Bytes(s.Elements())))
			w.add(graph.Tensor{Name: s.Name, Buffer: BufWeights, Offset: r.Offset, Format: f.Name, Shape: s.Shape})
			continue
		}
		// gate, up and down of one layer come in a row: interleave them per expert.
		group := specs[i : i+3]
		i += 2
		var sizes [3]int64
		var block int64
		for j, gs := range group {
			per := gs.Elements() / gs.Shape[0]
			sizes[j] = roundUp(int64(f.Bytes(per)), align)
			block += sizes[j]
		}
		base := w.experts.alloc(block * int64(group[0].Shape[0])).Offset
		off := base
		for j, gs := range group {
			w.add(graph.Tensor{Name: gs.Name, Buffer: BufExperts, Offset: off, Format: f.Name, Shape: gs.Shape, Stride: block})
			off += sizes[j]
		}
	}
	return w, nil
}

func (w *weightLayout) add(t graph.Tensor) {
	w.byName[t.Name] = len(w.tensors)
	w.tensors = append(w.tensors, t)
}

// tensor returns the placement of a role; a missing role is a generator bug.
func (w *weightLayout) tensor(name string) graph.Tensor {
	i, ok := w.byName[name]
	if !ok {
		panic("gen: no tensor " + name)
	}
	return w.tensors[i]
}

// whole is the byte range of a tensor (all slices, for stacked tensors).
func (w *weightLayout) whole(name string) graph.Range {
	t := w.tensor(name)
	f, _ := quant.Lookup(t.Format)
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	if t.Stride > 0 {
		per := f.Bytes(n / t.Shape[0])
		return graph.Range{Buffer: t.Buffer, Offset: t.Offset, Size: t.Stride*int64(t.Shape[0]-1) + int64(per)}
	}
	return graph.Range{Buffer: t.Buffer, Offset: t.Offset, Size: int64(f.Bytes(n))}
}

func formatCode(t graph.Tensor) int64 {
	f, _ := quant.Lookup(t.Format)
	return int64(f.Code)
}
