// Package convert writes a model's weights into a GGUF file: the tensor names,
// metadata keys and value transforms of llama.cpp's qwen3next and qwen4exp
// architectures (runtime/format/gguf), every tensor in the format the quant plan
// gives its class (rows that are not whole blocks laid out by the plan's row
// policy), and the whole model config under strata.config, so `strata run
// --gguf` needs nothing else. The weights come from any Source: an HF
// checkpoint (weights.HF) or random weights for benchmarks (weights.Random).
// Files are written tensor by tensor (routed experts expert by expert, the
// n-gram table in chunks of rows) through gguf.Writer, so memory is bounded
// by the largest other tensor, and atomically.
package convert

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/ngram"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/arch"
	"github.com/strata-llm/strata/runtime/format/gguf"
	"github.com/strata-llm/strata/runtime/tools/imatrix"
	"github.com/strata-llm/strata/runtime/weights"
)

// Source fills one role (index −1) or one slice of a stacked role in the given
// storage format, rows zero-padded to whole blocks when they are not; it is
// engine.WeightSource.
type Source interface {
	Read(spec models.TensorSpec, index int, format string, dst []byte) error
}

// NgramSource is a Source that also serves the PLE layers' n-gram tables row
// by row and checks their stored hash parameters (engine.NgramSource):
// weights.HF, weights.GGUF and weights.Random are. Models with PLE layers
// convert only from one.
type NgramSource interface {
	Source
	NgramTable(spec models.TensorSpec) (*weights.NgramTable, error)
	CheckNgram(layer int, multipliers, primes, offsets []int64) error
}

// Options tune a conversion.
type Options struct {
	// DropMTP leaves the MTP head out (and sets mtp.num_layers = 0 in the
	// embedded config). llama.cpp has no Qwen3-Next MTP and refuses a file
	// with tensors it does not load, so a file for llama.cpp drops it.
	DropMTP bool
	// Progress, when set, is called after each piece of tensor data is
	// written, with the bytes written so far and the total.
	Progress func(done, total int64)
	// Metadata are more key/value pairs for the file: the tokenizer and
	// chat template (runtime/text), for one.
	Metadata []gguf.KV
	// Imatrix, when set, gives the quantizers that take one (iq2_xs) their
	// importance weights, by GGUF tensor name and expert (see weighted.go).
	Imatrix *imatrix.Matrix
}

// ErrUnsupported marks models this package cannot write yet.
var ErrUnsupported = arch.ErrUnsupported

// tensor is one GGUF tensor and where its data come from.
type tensor struct {
	info  gguf.TensorInfo
	spec  models.TensorSpec
	rl    quant.RowLayout
	tr    gguf.Transform
	runs  []gguf.RowRun // rows gathered from the role; nil: the whole role
	cols  []gguf.ColRun // each row's columns reordered (qwen4exp value heads)
	table bool          // an n-gram table, written in chunks of rows
}

// Report says what a conversion wrote.
type Report struct {
	Config   *models.Config   // as embedded in the file
	Tensors  int              // GGUF tensors
	Bytes    int64            // tensor data, without alignment padding
	ByFormat map[string]int64 // tensor data bytes per storage format
	// ExpertBytes is one routed expert's gate, up and down data (of the
	// first MoE layer), the unit SSD streaming reads.
	ExpertBytes int64
	// Fallbacks are the tensors written in another format than the plan
	// named (Config.Quant names the written format when a whole class fell
	// back to one).
	Fallbacks []Fallback
	// Padded are the tensors whose rows were zero-padded to whole blocks
	// (rows=pad or smallest asked for it): a file only strata reads.
	Padded []string
	// Weighted are the tensors quantized with the imatrix; Unweighted those
	// in a format whose quantizer takes one that got none (not in the
	// matrix: the token embeddings, for one).
	Weighted, Unweighted []string
}

// Write converts the model c, reading from src, into a GGUF file at path.
func Write(path string, c *models.Config, src Source, opt Options) (*Report, error) {
	cfg, tensors, kv, err := plan(c, opt)
	if err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg, Tensors: len(tensors), ByFormat: map[string]int64{}, Fallbacks: fallbacksOf(cfg, c), Padded: paddedRows(tensors)}
	if err := checkNgram(cfg, src, tensors); err != nil {
		return nil, err
	}
	// Transformed roles (norms, A_log) are small: read them first, since
	// their exact values go into the header.
	exact := map[string][]float32{}
	for _, t := range tensors {
		if t.tr == gguf.Same {
			continue
		}
		v, err := readF32(src, t.spec, t.rl)
		if err != nil {
			return nil, err
		}
		exact[t.info.Name] = v
		kv = append(kv, gguf.KV{Key: gguf.KeyExactPrefix + t.info.Name, Value: gguf.Array{Elem: gguf.TypeFloat32, Values: v}})
	}
	infos := make([]gguf.TensorInfo, len(tensors))
	for i, t := range tensors {
		infos[i] = t.info
	}
	w, err := gguf.Create(path, kv, infos)
	if err != nil {
		return nil, err
	}
	var total, done int64
	for i, t := range w.Tensors() {
		total += t.Size
		rep.ByFormat[tensors[i].rl.Format.Name] += t.Size
		if l, ok := gguf.BlockOf(t.Name); ok && l == 0 && strings.HasSuffix(t.Name, "_exps.weight") {
			rep.ExpertBytes += t.Size / int64(t.Dims[len(t.Dims)-1])
		}
	}
	rep.Bytes = total
	progress := func(n int) {
		done += int64(n)
		if opt.Progress != nil {
			opt.Progress(done, total)
		}
	}
	var cached struct {
		role string
		data []byte
	}
	for _, t := range tensors {
		if t.rl.Format.EncodeWeighted != nil && !t.table {
			done, err := writeWeighted(w, src, t, opt.Imatrix, progress)
			if err != nil {
				w.Abort()
				return nil, fmt.Errorf("%s: tensor %s (role %s): %w", path, t.info.Name, t.spec.Name, err)
			}
			if done {
				rep.Weighted = append(rep.Weighted, t.info.Name)
				continue
			}
			rep.Unweighted = append(rep.Unweighted, t.info.Name)
		}
		if err := writeTensor(w, src, t, exact, &cached.role, &cached.data, progress); err != nil {
			w.Abort()
			return nil, fmt.Errorf("%s: tensor %s (role %s): %w", path, t.info.Name, t.spec.Name, err)
		}
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return rep, nil
}

// checkNgram refuses a source that cannot serve the model's n-gram tables,
// or whose stored hash parameters differ from the config's (the file records
// the computed ones; a mismatch would make it read the wrong rows).
func checkNgram(c *models.Config, src Source, tensors []tensor) error {
	a := &c.Architecture
	for _, t := range tensors {
		if !t.table {
			continue
		}
		ns, ok := src.(NgramSource)
		if !ok {
			return fmt.Errorf("model %s has PLE layers, but its weight source (%T) cannot serve n-gram tables", c.Name, src)
		}
		for l := 0; l < a.NumLayers; l++ {
			if ord := a.PLE.Ordinal(l); ord >= 0 {
				h, err := ngram.New(a.NgramParams(ord))
				if err != nil {
					return fmt.Errorf("model %s, layer %d: %w", c.Name, l, err)
				}
				if err := ns.CheckNgram(l, h.Multipliers, h.Primes, h.Offsets); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// writeTensor produces one tensor's data and streams it to w.
func writeTensor(w *gguf.Writer, src Source, t tensor, exact map[string][]float32, cachedRole *string, cached *[]byte, progress func(int)) error {
	rowBytes := t.rl.RowBytes()
	if v, ok := exact[t.info.Name]; ok {
		out := make([]byte, 4*len(v))
		g := make([]float32, len(v))
		for i, x := range v {
			g[i] = t.tr.ToGGUF(x)
		}
		t.rl.Format.Encode(toTensorOrder(t.cols, g, t.rl.Len), out)
		progress(len(out))
		return w.WriteTensor(t.info.Name, out)
	}
	if t.table {
		return writeTable(w, src.(NgramSource), t, progress)
	}
	if t.cols != nil {
		// Reordered columns (whole value heads): permute the float32 values,
		// then encode, so blocks are formed in the tensor's order.
		v, err := readF32Any(src, t.spec)
		if err != nil {
			return err
		}
		v = toTensorOrder(t.cols, v, t.rl.Len)
		f32 := quant.RowLayout{Format: f32Format, Len: t.rl.Len, Stored: t.rl.Len}
		b := make([]byte, 4*len(v))
		f32Format.Encode(v, b)
		out := make([]byte, t.spec.Rows()*rowBytes)
		if err := weights.TranscodeRows(b, f32, out, t.rl, t.spec.Rows(), nil); err != nil {
			return err
		}
		progress(len(out))
		return w.WriteTensor(t.info.Name, out)
	}
	if t.runs == nil && len(t.spec.Shape) == 3 {
		// A stacked role (routed experts): one slice at a time.
		per := t.spec.Rows() / t.spec.Shape[0] * rowBytes
		buf := make([]byte, per)
		for e := 0; e < t.spec.Shape[0]; e++ {
			if err := src.Read(t.spec, e, t.rl.Format.Name, buf); err != nil {
				return err
			}
			if _, err := w.Write(buf); err != nil {
				return err
			}
			progress(len(buf))
		}
		return nil
	}
	var data []byte
	if *cachedRole == t.spec.Name {
		data = *cached
	} else {
		data = make([]byte, t.spec.Rows()*rowBytes)
		if err := src.Read(t.spec, -1, t.rl.Format.Name, data); err != nil {
			return err
		}
	}
	if t.runs == nil {
		*cachedRole, *cached = "", nil
		progress(len(data))
		return w.WriteTensor(t.info.Name, data)
	}
	// Split roles (gdn.qkvz → attn_qkv, attn_gate) feed consecutive tensors:
	// keep the role for the next one.
	*cachedRole, *cached = t.spec.Name, data
	out := make([]byte, int(t.info.Dims[1])*rowBytes)
	for _, r := range t.runs {
		copy(out[r.TensorRow*rowBytes:(r.TensorRow+r.Rows)*rowBytes], data[r.RoleRow*rowBytes:(r.RoleRow+r.Rows)*rowBytes])
	}
	progress(len(out))
	return w.WriteTensor(t.info.Name, out)
}

// f32Format is the float32 format.
var f32Format, _ = quant.Lookup("f32")

// readF32 reads a whole role as float32 values.
func readF32(src Source, spec models.TensorSpec, rl quant.RowLayout) ([]float32, error) {
	if rl.Format.Name != "f32" || rl.Padded() {
		return nil, fmt.Errorf("role %s is transformed for GGUF (+1 or −exp) and must be stored as f32, not %s", spec.Name, rl.Format.Name)
	}
	return readF32Any(src, spec)
}

// readF32Any reads a whole role as float32 values, whatever it is stored as.
func readF32Any(src Source, spec models.TensorSpec) ([]float32, error) {
	b := make([]byte, 4*spec.Elements())
	if err := src.Read(spec, -1, "f32", b); err != nil {
		return nil, err
	}
	v := make([]float32, spec.Elements())
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v, nil
}

// toTensorOrder moves the columns of each row of n values from the role's
// order to the tensor's (nil cols: v itself).
func toTensorOrder(cols []gguf.ColRun, v []float32, n int) []float32 {
	if cols == nil {
		return v
	}
	out := make([]float32, len(v))
	for row := 0; row+n <= len(v); row += n {
		for _, c := range cols {
			copy(out[row+c.TensorCol:row+c.TensorCol+c.Cols], v[row+c.RoleCol:row+c.RoleCol+c.Cols])
		}
	}
	return out
}

// tableChunk bounds the bytes of n-gram table rows held at once.
const tableChunk = 16 << 20

// writeTable streams an n-gram table in chunks of rows: copied when the
// source stores them as planned, else converted (on every core).
func writeTable(w *gguf.Writer, src NgramSource, t tensor, progress func(int)) error {
	tab, err := src.NgramTable(t.spec)
	if err != nil {
		return err
	}
	rows, rb := t.spec.Shape[0], t.rl.RowBytes()
	if tab.Rows() != rows || tab.Width() != t.rl.Len {
		return fmt.Errorf("the source's n-gram table has %d rows of %d, the model config %d rows of %d", tab.Rows(), tab.Width(), rows, t.rl.Len)
	}
	per := max(1, tableChunk/rb)
	buf := make([]byte, min(per, rows)*rb)
	for first := 0; first < rows; first += per {
		b := buf[:min(per, rows-first)*rb]
		if err := tab.ReadRows(first, t.rl, b); err != nil {
			return err
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
		progress(len(b))
	}
	return nil
}

// plan lays out the GGUF file of model c: the config as written (MTP dropped
// when asked), the tensors in file order with their sources, and the
// metadata (without the strata.exact values, which need the weights).
func plan(c *models.Config, opt Options) (*models.Config, []tensor, []gguf.KV, error) {
	cfg := *c
	if opt.DropMTP {
		cfg.Architecture.MTP.NumLayers = 0
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, nil, fmt.Errorf("model %s: %w", c.Name, err)
	}
	// The embedded config names what is written, where a class fell back.
	if _, err := resolvePlan(&cfg); err != nil {
		return nil, nil, nil, fmt.Errorf("model %s: %w", c.Name, err)
	}
	ar, err := arch.ByModelType(cfg.Architecture.ModelType)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("model %s: GGUF conversion: %w", c.Name, err)
	}
	kv, err := ar.Metadata(&cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	names := ar.Names(&cfg, nil).Role
	var tensors []tensor
	quantized := false
	for _, s := range cfg.Tensors() {
		ls := s
		if s.Host() {
			// The n-gram table is an embedding table: it follows the embed
			// class (llama.cpp's files quantize it like one).
			ls.Class = models.ClassEmbeddings
		}
		rl, err := ls.Layout(cfg.Quant)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("model %s: %w", c.Name, err)
		}
		quantized = quantized || rl.Format.BlockElems > 1
		typ, err := quant.GGMLTypeByCode(rl.Format.Code)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("model %s: role %s: %w", c.Name, s.Name, err)
		}
		m, err := names(s.Name)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("model %s: %w", c.Name, err)
		}
		if m.Tensor != "" {
			tensors = append(tensors, tensor{info: gguf.TensorInfo{Name: m.Tensor, Dims: ggufDims(s.Shape, rl.Stored), Type: typ},
				spec: s, rl: rl, tr: m.Transform, cols: m.Cols, table: s.Host()})
			continue
		}
		if len(s.Shape) != 2 {
			return nil, nil, nil, fmt.Errorf("model %s: role %s of shape %v is split across tensors, which only works for matrices", c.Name, s.Name, s.Shape)
		}
		var names []string
		byName := map[string][]gguf.RowRun{}
		for _, r := range m.Runs {
			if _, ok := byName[r.Tensor]; !ok {
				names = append(names, r.Tensor)
			}
			byName[r.Tensor] = append(byName[r.Tensor], r)
		}
		for _, n := range names {
			rows := 0
			for _, r := range byName[n] {
				rows = max(rows, r.TensorRow+r.Rows)
			}
			tensors = append(tensors, tensor{info: gguf.TensorInfo{Name: n, Dims: []uint64{uint64(rl.Stored), uint64(rows)}, Type: typ}, spec: s, rl: rl, runs: byName[n]})
		}
	}
	toml, err := cfg.MarshalTOML()
	if err != nil {
		return nil, nil, nil, fmt.Errorf("model %s: %w", c.Name, err)
	}
	kv = slices.Insert(kv, 1, gguf.KV{Key: "general.name", Value: cfg.Name})
	if quantized {
		kv = append(kv, gguf.KV{Key: "general.quantization_version", Value: uint32(2)})
	}
	kv = append(kv, gguf.KV{Key: gguf.KeyConfig, Value: string(toml)})
	kv = append(kv, opt.Metadata...)
	for _, t := range tensors {
		if t.rl.Padded() {
			kv = append(kv, gguf.KV{Key: gguf.KeyRowLengthPrefix + t.info.Name, Value: uint32(t.rl.Len)})
		}
	}
	return &cfg, tensors, kv, nil
}

// ggufDims is a torch shape as GGUF ne (innermost first), rows stored as
// stored elements.
func ggufDims(shape []int, stored int) []uint64 {
	d := make([]uint64, len(shape))
	for i, v := range shape {
		d[len(shape)-1-i] = uint64(v)
	}
	d[0] = uint64(stored)
	return d
}

// paddedRows names the tensors whose rows are zero-padded to whole blocks
// ("name (rows of 16 → 32 in q8_0)"): only a plan's explicit rows=pad or
// smallest writes them. ggml requires a tensor's ne[0] to be a multiple of
// its type's block size, so such a file is strata's only (llama.cpp refuses
// it); the default row policy, fallback, never pads.
func paddedRows(tensors []tensor) []string {
	var padded []string
	for _, t := range tensors {
		if t.rl.Padded() {
			padded = append(padded, fmt.Sprintf("%s (rows of %d → %d in %s)", t.info.Name, t.rl.Len, t.rl.Stored, t.rl.Format.Name))
		}
	}
	return padded
}
