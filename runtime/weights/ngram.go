package weights

import (
	"fmt"
	"slices"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/format/safetensors"
)

// NgramTable serves rows of a PLE layer's hashed n-gram table from where they
// already lie: the checkpoint's mapped shards (HF), the GGUF mapping, or a
// generator (random weights). The table (51B parameters in the real model)
// is never loaded; only the rows a window's tokens hash to are touched. It is
// safe for concurrent use.
type NgramTable struct {
	role    string
	width   int
	rows    int
	layout  quant.RowLayout // how the shards store rows
	shards  [][]byte        // shard k holds rows [k·rowsPer, …)
	names   []string        // where each shard lives, for messages
	rowsPer int
	// fill generates rows [first, …) in layout to instead (random weights).
	fill func(first int, to quant.RowLayout, dst []byte)
	prefetchState
}

// NewNgramTable returns the table whose rows (width values each, stored as
// layout) lie in shards, concatenated in order: every shard whole rows, all
// but the last the same number. names say where each shard lives.
func NewNgramTable(role string, width int, layout quant.RowLayout, shards [][]byte, names []string) (*NgramTable, error) {
	if layout.Format == nil || layout.Len != width || width <= 0 {
		return nil, fmt.Errorf("n-gram table %s: rows of %d values cannot be stored as %d-value rows", role, width, layout.Len)
	}
	if len(shards) == 0 || len(names) != len(shards) {
		return nil, fmt.Errorf("n-gram table %s: no shards", role)
	}
	if layout.Format.Decode == nil {
		return nil, fmt.Errorf("n-gram table %s (%s): format %s cannot be decoded", role, names[0], layout.Format.Name)
	}
	rb := layout.RowBytes()
	t := &NgramTable{role: role, width: width, layout: layout, shards: shards, names: names, rowsPer: len(shards[0]) / rb}
	for i, sh := range shards {
		n := len(sh) / rb
		if len(sh)%rb != 0 || n == 0 {
			return nil, fmt.Errorf("n-gram table %s: %s holds %d bytes, not whole rows of %d bytes (%d × %s)", role, names[i], len(sh), rb, width, describe(layout))
		}
		if i < len(shards)-1 && n != t.rowsPer {
			return nil, fmt.Errorf("n-gram table %s: %s has %d rows, %s has %d (only the last shard may be shorter)", role, names[i], n, names[0], t.rowsPer)
		}
		t.rows += n
	}
	return t, nil
}

// Width is the number of values per row.
func (t *NgramTable) Width() int { return t.width }

// Rows is the number of rows.
func (t *NgramTable) Rows() int { return t.rows }

// Layout is how the table stores its rows.
func (t *NgramTable) Layout() quant.RowLayout { return t.layout }

// Gather writes row ids[i] into dst[i·width:(i+1)·width].
func (t *NgramTable) Gather(ids []int64, dst []float32) error {
	if len(dst) < len(ids)*t.width {
		return fmt.Errorf("n-gram table %s: %d rows need %d floats, got %d", t.role, len(ids), len(ids)*t.width, len(dst))
	}
	for i, id := range ids {
		if id < 0 || id >= int64(t.rows) {
			return fmt.Errorf("n-gram table %s: row %d out of range", t.role, id)
		}
		out := dst[i*t.width : (i+1)*t.width]
		if t.fill != nil {
			b := make([]byte, 4*t.width)
			f32 := quant.RowLayout{Format: mustFormat("f32"), Len: t.width, Stored: t.width}
			t.fill(int(id), f32, b)
			f32.DecodeRow(b, out)
			continue
		}
		k, r := int(id)/t.rowsPer, int(id)%t.rowsPer
		rb := t.layout.RowBytes()
		t.layout.DecodeRow(t.shards[k][r*rb:(r+1)*rb], out)
	}
	return nil
}

// ReadRows writes rows first, first+1, … stored as to into dst (whole rows):
// copied when to is the table's layout, else converted through float32.
func (t *NgramTable) ReadRows(first int, to quant.RowLayout, dst []byte) error {
	rb := to.RowBytes()
	if to.Len != t.width || len(dst)%rb != 0 {
		return fmt.Errorf("n-gram table %s: %d bytes are not whole rows of %d values stored as %s", t.role, len(dst), t.width, describe(to))
	}
	n := len(dst) / rb
	if first < 0 || first+n > t.rows {
		return fmt.Errorf("n-gram table %s: rows [%d, %d) out of range [0, %d)", t.role, first, first+n, t.rows)
	}
	if t.fill != nil {
		parallelRows(n, max(1, convChunk/max(to.Stored, 1)), func(lo, hi int) {
			t.fill(first+lo, to, dst[lo*rb:hi*rb])
		})
		return nil
	}
	srb := t.layout.RowBytes()
	for done := 0; done < n; {
		k, r := (first+done)/t.rowsPer, (first+done)%t.rowsPer
		cnt := min(n-done, len(t.shards[k])/srb-r)
		src := t.shards[k][r*srb : (r+cnt)*srb]
		out := dst[done*rb : (done+cnt)*rb]
		if t.layout == to {
			copy(out, src)
		} else if err := TranscodeRows(src, t.layout, out, to, cnt, nil); err != nil {
			return fmt.Errorf("n-gram table %s (%s): %w", t.role, t.names[k], err)
		}
		done += cnt
	}
	return nil
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
	width := spec.Shape[1]
	var shards []safetensors.Tensor
	var names []string
	if one, ok := h.ck.Tensor(base + "weight"); ok {
		shards, names = []safetensors.Tensor{one}, []string{base + "weight"}
	} else {
		for k := 0; ; k++ {
			name := fmt.Sprintf("%sshard_%d.weight", base, k)
			sh, ok := h.ck.Tensor(name)
			if !ok {
				break
			}
			shards, names = append(shards, sh), append(names, name)
		}
	}
	if len(shards) == 0 {
		return nil, fmt.Errorf("checkpoint %s has no n-gram table %sweight nor %sshard_0.weight (role %s)", h.ck.Dir(), base, base, spec.Name)
	}
	rows := 0
	data := make([][]byte, len(shards))
	for i, sh := range shards {
		if len(sh.Shape) != 2 || sh.Shape[1] != width {
			return nil, fmt.Errorf("checkpoint %s: tensor %s has shape %v, expected [rows %d] (role %s)", h.ck.Dir(), names[i], sh.Shape, width, spec.Name)
		}
		if i > 0 && i < len(shards)-1 && sh.Shape[0] != shards[0].Shape[0] {
			return nil, fmt.Errorf("checkpoint %s: shard %s has %d rows, shard 0 has %d (role %s)", h.ck.Dir(), names[i], sh.Shape[0], shards[0].Shape[0], spec.Name)
		}
		if sh.DType != shards[0].DType {
			return nil, fmt.Errorf("checkpoint %s: shard %s is %s, shard 0 is %s (role %s)", h.ck.Dir(), names[i], sh.DType, shards[0].DType, spec.Name)
		}
		rows += sh.Shape[0]
		data[i] = sh.Data
	}
	if rows != spec.Shape[0] {
		return nil, fmt.Errorf("checkpoint %s: n-gram table %s… has %d rows in %d shards, expected %d from the model config (role %s)", h.ck.Dir(), base, rows, len(shards), spec.Shape[0], spec.Name)
	}
	f, ok := sourceFormats[shards[0].DType]
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: n-gram table %s has dtype %s; only F32, F16 and BF16 load (role %s)", h.ck.Dir(), names[0], shards[0].DType, spec.Name)
	}
	for i := range names {
		names[i] = h.ck.Dir() + ": " + names[i]
	}
	return NewNgramTable(spec.Name, width, quant.RowLayout{Format: mustFormat(f), Len: width, Stored: width}, data, names)
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
	return compareNgram("checkpoint "+h.ck.Dir(), layer, [3]string{"layer_multipliers", "ngram_heads_vocab_sizes", "ngram_heads_offsets"},
		[3][]int64{m, p, o}, [3][]int64{multipliers, primes, offsets})
}

// compareNgram checks stored hash parameters (named names, in the order
// multipliers, head vocabulary sizes, head offsets) against computed ones.
func compareNgram(where string, layer int, names [3]string, got, want [3][]int64) error {
	for i := range names {
		if !slices.Equal(got[i], want[i]) {
			return fmt.Errorf("%s: layer %d's stored %s %v differ from the ones computed from the config %v (check the ple fields of the model config)", where, layer, names[i], got[i], want[i])
		}
	}
	return nil
}
