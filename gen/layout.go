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
	BufSmap    = "smap"
	// BufResidency is the routing-visible residency MoCE reads: one uint32
	// (0 or 1) per (layer, expert), written by the host between windows.
	BufResidency = "residency"
	BufState     = "state"
	BufAct       = "act"
	BufParams    = graph.ParamsBuffer
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
	// Every layer's expert block takes the largest layer's size: the
	// streaming arena has one slot size, and a file's own formats may differ
	// per layer (llama.cpp's Q4_K_M keeps some layers' down in q6_k).
	var slot int64
	for i := 0; i < len(specs); i++ {
		if specs[i].Class != models.ClassExperts || specs[i].Host() {
			continue
		}
		block, err := expertBlock(c, specs[i:i+3])
		if err != nil {
			return nil, err
		}
		slot = max(slot, block)
		i += 2
	}
	for i := 0; i < len(specs); i++ {
		s := specs[i]
		if s.Host() {
			continue // gathered by the host, never in a device buffer
		}
		// The row policy sizes rows that are not whole blocks: padded, or in
		// a fallback format (Flash-Next's 640-wide expert down rows).
		rl, err := s.Layout(c.Quant)
		if err != nil {
			return nil, err
		}
		if s.Class != models.ClassExperts {
			r := w.weights.alloc(int64(s.Rows()) * int64(rl.RowBytes()))
			w.add(placed(s, rl, BufWeights, r.Offset, 0))
			continue
		}
		// gate, up and down of one layer come in a row: interleave them per expert.
		group := specs[i : i+3]
		i += 2
		var sizes [3]int64
		var layouts [3]quant.RowLayout
		var block int64
		for j, gs := range group {
			if layouts[j], err = gs.Layout(c.Quant); err != nil {
				return nil, err
			}
			sizes[j] = roundUp(int64(gs.Rows()/gs.Shape[0])*int64(layouts[j].RowBytes()), align)
			block += sizes[j]
		}
		// One kernel (moe_gate_up) reads gate and up through one decoder.
		if layouts[0] != layouts[1] {
			return nil, fmt.Errorf("tensor %s is stored as %s and %s as %s: the expert kernel reads gate and up in one format", group[0].Name, layouts[0].Format.Name, group[1].Name, layouts[1].Format.Name)
		}
		// One expert is one page-aligned block: a slot of the streaming
		// arena, an entry of the .experts pack, one smap page address.
		block = max(roundUp(block, graph.ExpertPage), slot)
		w.experts.size = roundUp(w.experts.size, graph.ExpertPage)
		base := w.experts.alloc(block * int64(group[0].Shape[0])).Offset
		off := base
		for j, gs := range group {
			w.add(placed(gs, layouts[j], BufExperts, off, block))
			off += sizes[j]
		}
	}
	return w, nil
}

// expertBlock is the page-rounded size of one expert of a layer's gate, up
// and down.
func expertBlock(c *models.Config, group []models.TensorSpec) (int64, error) {
	var block int64
	for _, gs := range group {
		rl, err := gs.Layout(c.Quant)
		if err != nil {
			return 0, err
		}
		block += roundUp(int64(gs.Rows()/gs.Shape[0])*int64(rl.RowBytes()), align)
	}
	return roundUp(block, graph.ExpertPage), nil
}

// placed is the graph record of a tensor stored with row layout rl.
func placed(s models.TensorSpec, rl quant.RowLayout, buf string, off, stride int64) graph.Tensor {
	t := graph.Tensor{Name: s.Name, Buffer: buf, Offset: off, Format: rl.Format.Name, Shape: s.Shape, Stride: stride}
	if rl.Padded() {
		t.Stored = rl.Stored
	}
	return t
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
	rows := 1
	for _, d := range t.Shape[:len(t.Shape)-1] {
		rows *= d
	}
	rowBytes := int64(f.Bytes(t.RowStored()))
	if t.Stride > 0 {
		per := int64(rows/t.Shape[0]) * rowBytes
		return graph.Range{Buffer: t.Buffer, Offset: t.Offset, Size: t.Stride*int64(t.Shape[0]-1) + per}
	}
	return graph.Range{Buffer: t.Buffer, Offset: t.Offset, Size: int64(rows) * rowBytes}
}

func formatCode(t graph.Tensor) int64 {
	f, _ := quant.Lookup(t.Format)
	return int64(f.Code)
}
