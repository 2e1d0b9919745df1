// Package convert writes a model's weights into a GGUF file: the tensor names,
// metadata keys and value transforms of llama.cpp's qwen3next architecture
// (runtime/gguf), every tensor in the format the quant plan gives its class
// (rows that are not whole blocks laid out by the plan's row policy), and the
// whole model config under strata.config, so `strata run --gguf` needs nothing
// else. The weights come from any Source: an HF checkpoint (weights.HF) or
// random weights for benchmarks (weights.Random). Files are written tensor by
// tensor (routed experts expert by expert) through gguf.Writer, so memory is
// bounded by the largest non-expert tensor, and atomically.
package convert

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/gguf"
)

// Source fills one role (index −1) or one slice of a stacked role in the given
// storage format, rows zero-padded to whole blocks when they are not; it is
// engine.WeightSource.
type Source interface {
	Read(spec models.TensorSpec, index int, format string, dst []byte) error
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
}

// ErrUnsupported marks models this package cannot write yet.
var ErrUnsupported = errors.New("not supported yet")

// tensor is one GGUF tensor and where its data come from.
type tensor struct {
	info gguf.TensorInfo
	spec models.TensorSpec
	rl   quant.RowLayout
	tr   gguf.Transform
	runs []gguf.RowRun // rows gathered from the role; nil: the whole role
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
}

// Write converts the model c, reading from src, into a GGUF file at path.
func Write(path string, c *models.Config, src Source, opt Options) (*Report, error) {
	cfg, tensors, kv, err := plan(c, opt)
	if err != nil {
		return nil, err
	}
	rep := &Report{Config: cfg, Tensors: len(tensors), ByFormat: map[string]int64{}}
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

// writeTensor produces one tensor's data and streams it to w.
func writeTensor(w *gguf.Writer, src Source, t tensor, exact map[string][]float32, cachedRole *string, cached *[]byte, progress func(int)) error {
	rowBytes := t.rl.RowBytes()
	if v, ok := exact[t.info.Name]; ok {
		out := make([]byte, 4*len(v))
		g := make([]float32, len(v))
		for i, x := range v {
			g[i] = t.tr.ToGGUF(x)
		}
		t.rl.Format.Encode(g, out)
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

// readF32 reads a whole role as float32 values.
func readF32(src Source, spec models.TensorSpec, rl quant.RowLayout) ([]float32, error) {
	if rl.Format.Name != "f32" || rl.Padded() {
		return nil, fmt.Errorf("role %s is transformed for GGUF (+1 or −exp) and must be stored as f32, not %s", spec.Name, rl.Format.Name)
	}
	b := make([]byte, 4*spec.Elements())
	if err := src.Read(spec, -1, "f32", b); err != nil {
		return nil, err
	}
	v := make([]float32, spec.Elements())
	rl.Format.Decode(b, v)
	return v, nil
}

// plan lays out the GGUF file of model c: the config as written (MTP dropped
// when asked), the tensors in file order with their sources, and the
// metadata (without the strata.exact values, which need the weights).
func plan(c *models.Config, opt Options) (*models.Config, []tensor, []gguf.KV, error) {
	if c.Architecture.ModelType != models.TypeQwen3Next {
		return nil, nil, nil, fmt.Errorf("model %s: GGUF conversion of model type %q is %w (only %q: llama.cpp's qwen4exp tensor names are not known to us, see docs/decisions.md)",
			c.Name, c.Architecture.ModelType, ErrUnsupported, models.TypeQwen3Next)
	}
	cfg := *c
	if opt.DropMTP {
		cfg.Architecture.MTP.NumLayers = 0
	}
	if err := cfg.Validate(); err != nil {
		return nil, nil, nil, fmt.Errorf("model %s: %w", c.Name, err)
	}
	a := &cfg.Architecture
	params, err := QwenNextParams(&cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	dims := QwenNextDims(&cfg)
	var tensors []tensor
	quantized := false
	for _, s := range cfg.Tensors() {
		if s.Host() {
			return nil, nil, nil, fmt.Errorf("model %s: role %s is host-side (n-gram table): %w", c.Name, s.Name, ErrUnsupported)
		}
		rl, err := s.Layout(cfg.Quant)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("model %s: %w", c.Name, err)
		}
		quantized = quantized || rl.Format.BlockElems > 1
		typ, err := quant.GGMLTypeByCode(rl.Format.Code)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("model %s: role %s: %w", c.Name, s.Name, err)
		}
		// We write llama.cpp's current form: attn_qkv + attn_gate for the
		// GDN input, gate and up experts apart, q/k/v apart.
		m, err := gguf.QwenNextModelRole(dims, gguf.QwenNextForm{}, a.NumLayers, s.Name)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("model %s: %w", c.Name, err)
		}
		if m.Tensor != "" {
			tensors = append(tensors, tensor{info: gguf.TensorInfo{Name: m.Tensor, Dims: ggufDims(s.Shape, rl.Stored), Type: typ}, spec: s, rl: rl, tr: m.Transform})
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
	kv := params.Metadata()
	kv = slices.Insert(kv, 1, gguf.KV{Key: "general.name", Value: cfg.Name})
	if quantized {
		kv = append(kv, gguf.KV{Key: "general.quantization_version", Value: uint32(2)})
	}
	if a.MTP.NumLayers > 0 {
		kv = append(kv, gguf.KV{Key: gguf.ArchQwenNext + "." + gguf.KeyNextNLayers, Value: uint32(a.MTP.NumLayers)})
	}
	kv = append(kv, gguf.KV{Key: gguf.KeyConfig, Value: string(toml)})
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

// QwenNextDims are the sizes the qwen3next name map needs, from a config.
func QwenNextDims(c *models.Config) gguf.QwenNextDims {
	a := &c.Architecture
	la := a.LinearAttention
	return gguf.QwenNextDims{
		KeyHeads: la.NumKeyHeads, ValueHeads: la.NumValueHeads, KeyHeadDim: la.KeyHeadDim, ValueHeadDim: la.ValueHeadDim,
		Heads: a.Attention.NumHeads, KVHeads: a.Attention.NumKVHeads, HeadDim: a.Attention.HeadDim,
		OutputGate: a.Attention.OutputGate, ExpertFFN: a.MoE.IntermediateSize,
	}
}

// QwenNextParams are the qwen3next hyperparameters of a config, or an error
// naming what llama.cpp's keys cannot express.
func QwenNextParams(c *models.Config) (gguf.QwenNextParams, error) {
	a := &c.Architecture
	la := a.LinearAttention
	var errs []error
	if la.KeyHeadDim != la.ValueHeadDim {
		errs = append(errs, fmt.Errorf("linear_attention key_head_dim %d ≠ value_head_dim %d (qwen3next GGUF has one ssm.state_size for both)", la.KeyHeadDim, la.ValueHeadDim))
	}
	if !a.Attention.OutputGate {
		errs = append(errs, errors.New("attention.output_gate is false (qwen3next GGUF assumes gated attention)"))
	}
	if la.GateAct != "" && la.GateAct != "silu" {
		errs = append(errs, fmt.Errorf("linear_attention.gate_act is %q (qwen3next uses silu)", la.GateAct))
	}
	interval, err := fullAttentionInterval(a.LayerTypes)
	if err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return gguf.QwenNextParams{}, fmt.Errorf("model %s cannot be written as qwen3next GGUF: %w", c.Name, err)
	}
	return gguf.QwenNextParams{
		Layers: a.NumLayers, ContextLength: a.Attention.MaxPositions, Hidden: a.HiddenSize, FFN: a.MoE.DenseIntermediateSize,
		Heads: a.Attention.NumHeads, KVHeads: a.Attention.NumKVHeads, HeadDim: a.Attention.HeadDim,
		RMSEps: a.RMSNormEps, RopeTheta: a.Attention.RopeTheta, RopeDim: a.Attention.RotaryDim(),
		Experts: a.MoE.NumExperts, ExpertsUsed: a.MoE.ExpertsPerToken,
		ExpertFFN: a.MoE.IntermediateSize, SharedFFN: a.MoE.SharedExpertIntermediateSize,
		ConvKernel: la.ConvKernel, KeyHeads: la.NumKeyHeads, ValueHeads: la.NumValueHeads, StateSize: la.KeyHeadDim,
		FullAttentionInterval: interval,
	}, nil
}

// fullAttentionInterval is n such that layer i is full attention exactly when
// (i+1) % n == 0, as llama.cpp's qwen3next.full_attention_interval says.
func fullAttentionInterval(types []string) (int, error) {
	n := len(types) + 1 // no full-attention layer at all
	if i := slices.Index(types, models.LayerFullAttention); i >= 0 {
		n = i + 1
	}
	for i, t := range types {
		if (t == models.LayerFullAttention) != ((i+1)%n == 0) {
			return 0, fmt.Errorf("layer_types %s do not repeat every %d layers (qwen3next GGUF records full attention as a fixed interval)", strings.Join(types, ","), n)
		}
	}
	return n, nil
}
