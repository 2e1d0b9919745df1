package weights

import (
	"fmt"
	"slices"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/safetensors"
)

// NgramTable reads rows of a PLE layer's hashed n-gram table straight from the
// checkpoint's mapping: the table (51B parameters in the real model) is never
// loaded, only the rows a window's tokens hash to are touched.
type NgramTable struct {
	role    string
	shards  []safetensors.Tensor
	names   []string
	rowsPer int // rows per shard (the last may hold fewer)
	width   int
	format  *quant.Format
}

// ngramPrefix is where layer prefix's store lives in the checkpoint.
func ngramPrefix(text, layerPrefix string) string {
	return text + layerPrefix + "ple.ple_embedding."
}

// NgramTable opens the table of a "layers.{l}.ple.table" role: either one
// ngram_embedding.weight or shards ngram_embedding.shard_{k}.weight, k = 0, 1,
// … in numeric order, concatenated along rows.
func (h *HF) NgramTable(spec models.TensorSpec) (*NgramTable, error) {
	layerPrefix, role, ok := h.splitLayer(spec.Name)
	if !ok || role != "ple.table" || len(spec.Shape) != 2 {
		return nil, fmt.Errorf("role %s is not an n-gram table", spec.Name)
	}
	base := ngramPrefix(h.textPrefix(), layerPrefix) + "ngram_embedding."
	t := &NgramTable{role: spec.Name, width: spec.Shape[1]}
	if one, ok := h.ck.Tensor(base + "weight"); ok {
		t.shards, t.names = []safetensors.Tensor{one}, []string{base + "weight"}
	} else {
		for k := 0; ; k++ {
			name := fmt.Sprintf("%sshard_%d.weight", base, k)
			sh, ok := h.ck.Tensor(name)
			if !ok {
				break
			}
			t.shards, t.names = append(t.shards, sh), append(t.names, name)
		}
	}
	if len(t.shards) == 0 {
		return nil, fmt.Errorf("checkpoint %s has no n-gram table %sweight nor %sshard_0.weight (role %s)", h.ck.Dir(), base, base, spec.Name)
	}
	rows := 0
	for i, sh := range t.shards {
		if len(sh.Shape) != 2 || sh.Shape[1] != t.width {
			return nil, fmt.Errorf("checkpoint %s: tensor %s has shape %v, expected [rows %d] (role %s)", h.ck.Dir(), t.names[i], sh.Shape, t.width, spec.Name)
		}
		if i > 0 && i < len(t.shards)-1 && sh.Shape[0] != t.shards[0].Shape[0] {
			return nil, fmt.Errorf("checkpoint %s: shard %s has %d rows, shard 0 has %d (role %s)", h.ck.Dir(), t.names[i], sh.Shape[0], t.shards[0].Shape[0], spec.Name)
		}
		if sh.DType != t.shards[0].DType {
			return nil, fmt.Errorf("checkpoint %s: shard %s is %s, shard 0 is %s (role %s)", h.ck.Dir(), t.names[i], sh.DType, t.shards[0].DType, spec.Name)
		}
		rows += sh.Shape[0]
	}
	if rows != spec.Shape[0] {
		return nil, fmt.Errorf("checkpoint %s: n-gram table %s… has %d rows in %d shards, expected %d from the model config (role %s)", h.ck.Dir(), base, rows, len(t.shards), spec.Shape[0], spec.Name)
	}
	f, ok := sourceFormats[t.shards[0].DType]
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: n-gram table %s has dtype %s; only F32, F16 and BF16 load (role %s)", h.ck.Dir(), t.names[0], t.shards[0].DType, spec.Name)
	}
	t.format, _ = quant.Lookup(f)
	t.rowsPer = t.shards[0].Shape[0]
	return t, nil
}

// Width is the number of values per row.
func (t *NgramTable) Width() int { return t.width }

// Gather writes row ids[i] into dst[i·width:(i+1)·width].
func (t *NgramTable) Gather(ids []int64, dst []float32) error {
	if len(dst) < len(ids)*t.width {
		return fmt.Errorf("n-gram table %s: %d rows need %d floats, got %d", t.role, len(ids), len(ids)*t.width, len(dst))
	}
	rowBytes := t.format.Bytes(t.width)
	for i, id := range ids {
		k, r := int(id)/t.rowsPer, int(id)%t.rowsPer
		if id < 0 || k >= len(t.shards) || r >= t.shards[k].Shape[0] {
			return fmt.Errorf("n-gram table %s: row %d out of range", t.role, id)
		}
		t.format.Decode(t.shards[k].Data[r*rowBytes:(r+1)*rowBytes], dst[i*t.width:(i+1)*t.width])
	}
	return nil
}

// NgramBuffers returns the int64 buffers HF stores beside a PLE layer's table
// (layer_multipliers, ngram_heads_vocab_sizes, ngram_heads_offsets), or
// ok = false when the checkpoint lacks them.
func (h *HF) NgramBuffers(layer int) (multipliers, primes, offsets []int64, ok bool, err error) {
	base := ngramPrefix(h.textPrefix(), fmt.Sprintf("layers.%d.", layer))
	read := func(name string) []int64 {
		t, found := h.ck.Tensor(base + name)
		if !found || err != nil {
			return nil
		}
		v, e := t.Int64s()
		if e != nil {
			err = fmt.Errorf("checkpoint %s: %s%s: %w", h.ck.Dir(), base, name, e)
		}
		return v
	}
	multipliers, primes, offsets = read("layer_multipliers"), read("ngram_heads_vocab_sizes"), read("ngram_heads_offsets")
	ok = multipliers != nil && primes != nil && offsets != nil
	return multipliers, primes, offsets, ok, err
}

// CheckNgram compares a table's stored hash parameters, when present, with
// the ones computed from the config: a mismatch would silently read the wrong
// rows.
func (h *HF) CheckNgram(layer int, multipliers, primes, offsets []int64) error {
	m, p, o, ok, err := h.NgramBuffers(layer)
	if err != nil || !ok {
		return err
	}
	for _, c := range []struct {
		name      string
		got, want []int64
	}{{"layer_multipliers", m, multipliers}, {"ngram_heads_vocab_sizes", p, primes}, {"ngram_heads_offsets", o, offsets}} {
		if !slices.Equal(c.got, c.want) {
			return fmt.Errorf("checkpoint %s: layer %d's stored %s %v differ from the ones computed from the config %v (check the ple fields of the model config)", h.ck.Dir(), layer, c.name, c.got, c.want)
		}
	}
	return nil
}
