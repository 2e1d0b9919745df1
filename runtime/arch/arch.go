// Package arch holds, one file per architecture, how a model of that
// architecture is described outside strata: every hyperparameter's GGUF
// metadata key, its HF config.json key and the models.Config field it is,
// with the transform between them (one declarative table, Arch.Params), and
// the GGUF tensor names of its roles (hf.go: the HF checkpoint names, which
// both share). Generic loops over the table write a GGUF file's metadata
// (Metadata), check a file against a config (Check), build a config from
// a file's metadata alone (Config) and import an HF config.json (ImportHF,
// hfconfig.go), so an architecture's keys are written once.
package arch

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/format/gguf"
)

// Arch is one architecture.
type Arch struct {
	GGUF      string // general.architecture
	ModelType string // models.Architecture.ModelType
	// HFTypes are the HF model_type values of the architecture.
	HFTypes []string
	// Params are the hyperparameters, in the order a file lists them (rows
	// without a GGUF key: where ImportHF reads them).
	Params []Param
	// Extra are metadata pairs written after the params.
	Extra []gguf.KV
	// writable names what of a config the GGUF keys cannot express.
	writable func(a *models.Architecture) []error
	// opened refuses a file before its params are read (a newer revision).
	opened func(f *gguf.File) error
	// finish sets what no key holds (sizes from tensors, HF's defaults) on a
	// config whose params were read from f.
	finish func(f *gguf.File, a *models.Architecture, m Meta) error
	// hfNested is the key under which a config of model_type ModelType
	// nests the decoder's fields ("": none).
	hfNested string
	// hfFixed sets on a config being imported from HF what no HF key says
	// (nil: nothing).
	hfFixed func(a *models.Architecture)
	// names is the tensor-name map for config c and a file that has the
	// tensors has says (nil: the form strata writes).
	names func(c *models.Config, has func(string) bool) Names
}

// Names maps the roles of one model to GGUF tensors.
type Names struct {
	Role func(role string) (gguf.RoleMap, error)
	// SplitGDN: the file holds qwen3next's GDN input projections as
	// attn_qkv + attn_gate (models.LinearAttention.SplitProjections runs them
	// so, in place).
	SplitGDN bool
}

// Type is how a hyperparameter is stored in GGUF metadata.
type Type int

const (
	Uint    Type = iota // written as uint32; read from any integer width, at most MaxInt32
	Float               // written as float32
	Int32s              // an int32 array; read from any integer array, elements 0 … MaxInt32
	Uint64s             // a uint64 array (llama.cpp's loader refuses int64); read from any integer array
)

// Value is one hyperparameter's value: Int (Uint), Float, or Ints (arrays).
type Value struct {
	Int   int
	Float float64
	Ints  []int64
}

// Param is one row of an architecture's table.
type Param struct {
	Key   string // the GGUF metadata key, after "<arch>." ("": GGUF has none)
	HF    string // the HF config.json key ("": HF has none)
	Field string // the model.toml field, or what the value derives from
	Type  Type
	// HFAsIs: the HF value is the config field's, unchanged (else the
	// field derives from it, or it from several).
	HFAsIs bool
	// Get is the file's value for a config.
	Get func(a *models.Architecture) (Value, error)
	// Set stores a file's value in a config being built, the params before
	// it in the table already set; m reads other keys. nil: no config field
	// takes it (llama.cpp's alone, or read by finish).
	Set func(a *models.Architecture, v Value, m Meta) error
	// When, when set, says whether a config has the key: it is written,
	// read and checked only then (on read, the config built so far).
	When func(a *models.Architecture) bool
	// Optional: a file may lack it; it is read when present, whatever When
	// says.
	Optional bool
	// Check: a file whose value differs from the config's is refused.
	Check bool
	// Says is what a mismatch error adds about the config's value.
	Says string
	// FromHF imports the row's HF key (and the keys only it reads) into a
	// config being built, the rows before it already imported; errors go to
	// r. nil: ImportHF takes nothing from the row (another row reads its
	// HF key).
	FromHF func(a *models.Architecture, r *hfReader)
	// intField is the config field of a row that is one int as it is.
	intField func(a *models.Architecture) *int
}

// inGGUF says whether the row has a GGUF key.
func (p Param) inGGUF() bool { return p.Key != "" }

// ErrUnsupported marks configs an architecture's GGUF cannot hold yet.
var ErrUnsupported = errors.New("not supported yet")

// All are the architectures strata reads and writes GGUF files of.
var All = []*Arch{QwenNext, Qwen4Exp}

// ByModelType finds the architecture of a model type.
func ByModelType(t string) (*Arch, error) {
	for _, a := range All {
		if a.ModelType == t {
			return a, nil
		}
	}
	return nil, fmt.Errorf("model type %q is %w in GGUF (only %s)", t, ErrUnsupported, strings.Join(list(func(a *Arch) string { return fmt.Sprintf("%q", a.ModelType) }), " and "))
}

func list(f func(a *Arch) string) []string {
	var out []string
	for _, a := range All {
		out = append(out, f(a))
	}
	return out
}

// Key is the full metadata key of a param key.
func (ar *Arch) Key(name string) string { return ar.GGUF + "." + name }

// Metadata returns general.architecture and the architecture's keys for c,
// as a file strata writes lists them, or an error naming what the keys
// cannot express.
func (ar *Arch) Metadata(c *models.Config) ([]gguf.KV, error) {
	a := &c.Architecture
	if errs := ar.writable(a); len(errs) > 0 {
		return nil, fmt.Errorf("model %s cannot be written as %s GGUF: %w", c.Name, ar.GGUF, errors.Join(errs...))
	}
	kv := []gguf.KV{{Key: "general.architecture", Value: ar.GGUF}}
	for _, p := range ar.Params {
		if !p.inGGUF() || p.When != nil && !p.When(a) {
			continue
		}
		v, err := p.Get(a)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", c.Name, err)
		}
		kv = append(kv, gguf.KV{Key: ar.Key(p.Key), Value: encode(p.Type, v)})
	}
	return append(kv, ar.Extra...), nil
}

// Names is the tensor-name map of config c for file f (nil: the form strata
// writes).
func (ar *Arch) Names(c *models.Config, f *gguf.File) Names {
	var has func(string) bool
	if f != nil {
		has = f.Has
	}
	return ar.names(c, has)
}

// Check refuses a file of another architecture, with a key missing or of
// the wrong type, or whose checked params differ from config c's (all of
// those at once).
func (ar *Arch) Check(f *gguf.File, c *models.Config) error {
	m, err := ar.open(f)
	if err != nil {
		return err
	}
	a := &c.Architecture
	var errs []error
	for _, p := range ar.Params {
		if !p.inGGUF() {
			continue
		}
		v, ok, err := m.read(p, a)
		if err != nil {
			return err
		}
		if !ok || !p.Check {
			continue
		}
		want, err := p.Get(a)
		if err != nil {
			return fmt.Errorf("model %s: %w", c.Name, err)
		}
		if !equal(v, want) {
			says := ""
			if p.Says != "" {
				says = " (" + p.Says + ")"
			}
			errs = append(errs, fmt.Errorf("gguf %s: %s = %s, but the model config says %s%s", f.Path, m.Key(p.Key), show(p.Type, v), show(p.Type, want), says))
		}
	}
	return errors.Join(errs...)
}

// Config builds the model config of a file from its metadata alone (a
// llama.cpp file, without strata.config): the params through the table,
// then what no key holds, then the importer's defaults and validation
// (models.Imported). The quant plan's formats are placeholders: a loader
// takes the file's own.
func (ar *Arch) Config(f *gguf.File) (*models.Config, error) {
	m, err := ar.open(f)
	if err != nil {
		return nil, err
	}
	c := &models.Config{}
	a := &c.Architecture
	a.ModelType = ar.ModelType
	for _, p := range ar.Params {
		if !p.inGGUF() {
			continue
		}
		v, ok, err := m.read(p, a)
		if err != nil {
			return nil, err
		}
		if ok && p.Set != nil {
			if err := p.Set(a, v, m); err != nil {
				return nil, err
			}
		}
	}
	if err := ar.finish(f, a, m); err != nil {
		return nil, err
	}
	c.Quant = models.QuantPlan{Trunk: "f32", Experts: "f32", Embeddings: "f32", Head: "f32"}
	name := strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
	return models.Imported(c, models.ImportOptions{Name: name, Source: f.Path + " (" + ar.GGUF + " metadata)"})
}

// ConfigOf builds the config of a GGUF file without strata.config from its
// metadata (Arch.Config of its architecture).
func ConfigOf(f *gguf.File) (*models.Config, error) {
	name, err := f.String("general.architecture")
	if err != nil {
		return nil, err
	}
	for _, ar := range All {
		if ar.GGUF == name {
			return ar.Config(f)
		}
	}
	return nil, fmt.Errorf("gguf %s has no %s metadata, and a model config is derived from metadata only for %s files (general.architecture is %q): pass its model config", f.Path, gguf.KeyConfig, strings.Join(list(func(a *Arch) string { return a.GGUF }), " and "), name)
}

func (ar *Arch) open(f *gguf.File) (Meta, error) {
	m := Meta{f: f, prefix: ar.GGUF + "."}
	name, err := f.String("general.architecture")
	if err != nil {
		return m, err
	}
	if name != ar.GGUF {
		return m, fmt.Errorf("gguf %s: general.architecture is %q, want %q", f.Path, name, ar.GGUF)
	}
	if ar.opened != nil {
		if err := ar.opened(f); err != nil {
			return m, err
		}
	}
	return m, nil
}

// Meta reads an architecture's keys from one file; errors name the file and
// the key.
type Meta struct {
	f      *gguf.File
	prefix string
}

// Key is the full metadata key.
func (m Meta) Key(name string) string { return m.prefix + name }

// Has reports whether the file has the key.
func (m Meta) Has(name string) bool {
	_, ok := m.f.Value(m.Key(name))
	return ok
}

// Int reads an integer key (any width, at most MaxInt32).
func (m Meta) Int(name string) (int, error) {
	v, err := m.f.Uint(m.Key(name))
	if err != nil {
		return 0, err
	}
	if v > math.MaxInt32 {
		return 0, fmt.Errorf("gguf %s: %s = %d is out of range", m.f.Path, m.Key(name), v)
	}
	return int(v), nil
}

// read reads param p when the config so far has it (ok false: skipped, or
// optional and absent).
func (m Meta) read(p Param, a *models.Architecture) (v Value, ok bool, err error) {
	switch {
	case p.Optional && !m.Has(p.Key), !p.Optional && p.When != nil && !p.When(a):
		return v, false, nil
	}
	key := m.Key(p.Key)
	switch p.Type {
	case Uint:
		v.Int, err = m.Int(p.Key)
	case Float:
		v.Float, err = m.f.Float(key)
	case Int32s:
		if v.Ints, err = m.f.Ints(key); err == nil {
			for i, x := range v.Ints {
				if x < 0 || x > math.MaxInt32 {
					return v, false, fmt.Errorf("gguf %s: %s[%d] = %d is out of range", m.f.Path, key, i, x)
				}
			}
		}
	case Uint64s:
		v.Ints, err = m.f.Ints(key)
	}
	return v, err == nil, err
}

func encode(t Type, v Value) any {
	switch t {
	case Float:
		return float32(v.Float)
	case Int32s:
		out := make([]int32, len(v.Ints))
		for i, x := range v.Ints {
			out[i] = int32(x)
		}
		return gguf.Array{Elem: gguf.TypeInt32, Values: out}
	case Uint64s:
		out := make([]uint64, len(v.Ints))
		for i, x := range v.Ints {
			out[i] = uint64(x)
		}
		return gguf.Array{Elem: gguf.TypeUint64, Values: out}
	}
	return uint32(v.Int)
}

func equal(a, b Value) bool {
	return a.Int == b.Int && a.Float == b.Float && slices.Equal(a.Ints, b.Ints)
}

func show(t Type, v Value) string {
	switch t {
	case Float:
		return fmt.Sprint(v.Float)
	case Int32s, Uint64s:
		return fmt.Sprint(v.Ints)
	}
	return fmt.Sprint(v.Int)
}

// The constructors of the table's rows.

// field is a param that is one int field of the config, as is.
// Its HF import reads the HF key as a required integer (hfOr: optional).
func field(key, hf, name string, ptr func(a *models.Architecture) *int) Param {
	p := Param{Key: key, HF: hf, HFAsIs: true, Field: name, Type: Uint, intField: ptr,
		Get: func(a *models.Architecture) (Value, error) { return Value{Int: *ptr(a)}, nil },
		Set: func(a *models.Architecture, v Value, _ Meta) error { *ptr(a) = v.Int; return nil }}
	p.FromHF = hfInt(p)
	return p
}

// withHF replaces a row's HF import.
func withHF(p Param, from func(a *models.Architecture, r *hfReader)) Param {
	p.FromHF = from
	return p
}

// headSize is a field that must be positive (other sizes divide by it).
func headSize(key, hf, name string, ptr func(a *models.Architecture) *int) Param {
	p := field(key, hf, name, ptr)
	p.Set = func(a *models.Architecture, v Value, m Meta) error {
		if v.Int <= 0 {
			return fmt.Errorf("gguf %s: %s = %d, want a positive head size", m.f.Path, m.Key(key), v.Int)
		}
		*ptr(a) = v.Int
		return nil
	}
	return p
}

// checked marks a param compared against the config a file is loaded with.
func checked(p Param) Param { p.Check = true; return p }

// derived is a Uint param computed from the config (Set nil: a reader
// derives it elsewhere, or takes nothing from it).
func derived(key, hf, name string, get func(a *models.Architecture) int) Param {
	return Param{Key: key, HF: hf, Field: name, Type: Uint,
		Get: func(a *models.Architecture) (Value, error) { return Value{Int: get(a)}, nil }}
}

// ints is a Value of an int slice.
func ints(v []int) Value {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return Value{Ints: out}
}

// The rows both Qwen-Next architectures share (same key, HF key, field and
// transform); each architecture's table lists them in its own order.

var (
	pBlockCount   = checked(field("block_count", "num_hidden_layers", "architecture.num_layers", func(a *models.Architecture) *int { return &a.NumLayers }))
	pContext      = field("context_length", "max_position_embeddings", "architecture.attention.max_positions", func(a *models.Architecture) *int { return &a.Attention.MaxPositions })
	pHidden       = checked(field("embedding_length", "hidden_size", "architecture.hidden_size", func(a *models.Architecture) *int { return &a.HiddenSize }))
	pHeads        = checked(field("attention.head_count", "num_attention_heads", "architecture.attention.num_heads", func(a *models.Architecture) *int { return &a.Attention.NumHeads }))
	pKVHeads      = checked(field("attention.head_count_kv", "num_key_value_heads", "architecture.attention.num_kv_heads", func(a *models.Architecture) *int { return &a.Attention.NumKVHeads }))
	pValueLength  = derived("attention.value_length", "head_dim", "architecture.attention.head_dim (values as keys)", func(a *models.Architecture) int { return a.Attention.HeadDim })
	pExperts      = checked(field("expert_count", "num_experts", "architecture.moe.num_experts", func(a *models.Architecture) *int { return &a.MoE.NumExperts }))
	pExpertsUsed  = checked(field("expert_used_count", "num_experts_per_tok", "architecture.moe.experts_per_token", func(a *models.Architecture) *int { return &a.MoE.ExpertsPerToken }))
	pExpertFFN    = checked(field("expert_feed_forward_length", "moe_intermediate_size", "architecture.moe.intermediate_size", func(a *models.Architecture) *int { return &a.MoE.IntermediateSize }))
	pSharedFFN    = checked(field("expert_shared_feed_forward_length", "shared_expert_intermediate_size", "architecture.moe.shared_expert_intermediate_size", func(a *models.Architecture) *int { return &a.MoE.SharedExpertIntermediateSize }))
	pConvKernel   = checked(field("ssm.conv_kernel", "linear_conv_kernel_dim", "architecture.linear_attention.conv_kernel", func(a *models.Architecture) *int { return &a.LinearAttention.ConvKernel }))
	pStateSize    = checked(field("ssm.state_size", "linear_key_head_dim", "architecture.linear_attention.key_head_dim", func(a *models.Architecture) *int { return &a.LinearAttention.KeyHeadDim }))
	pTimeStepRank = checked(field("ssm.time_step_rank", "linear_num_value_heads", "architecture.linear_attention.num_value_heads", func(a *models.Architecture) *int { return &a.LinearAttention.NumValueHeads }))
	pGroupCount   = checked(field("ssm.group_count", "linear_num_key_heads", "architecture.linear_attention.num_key_heads", func(a *models.Architecture) *int { return &a.LinearAttention.NumKeyHeads }))

	// head_dim (HF: hidden_size / num_attention_heads when absent); the
	// rope dimension count below divides by it.
	pKeyLength = withHF(checked(headSize("attention.key_length", "head_dim", "architecture.attention.head_dim", func(a *models.Architecture) *int { return &a.Attention.HeadDim })), hfHeadDim)
	// ssm.inner_size = num_v_heads × head_v_dim, as llama.cpp reads it.
	pInnerSize = checked(Param{Key: "ssm.inner_size", HF: "linear_value_head_dim", Field: "architecture.linear_attention.value_head_dim × num_value_heads", Type: Uint,
		FromHF: func(a *models.Architecture, r *hfReader) {
			a.LinearAttention.ValueHeadDim = r.reqInt("linear_value_head_dim")
		},
		Get: func(a *models.Architecture) (Value, error) { return Value{Int: a.LinearAttention.ValueDim()}, nil },
		Set: func(a *models.Architecture, v Value, m Meta) error {
			heads, err := m.Int(pTimeStepRank.Key)
			if err != nil {
				return err
			}
			if heads == 0 || v.Int == 0 || v.Int%heads != 0 {
				return fmt.Errorf("gguf %s: %s = %d is not a whole number of %s = %d value heads", m.f.Path, m.Key("ssm.inner_size"), v.Int, m.Key(pTimeStepRank.Key), heads)
			}
			a.LinearAttention.ValueHeadDim = v.Int / heads
			return nil
		}})
)

// ropeDim is rope.dimension_count: partial_rotary_factor = its value /
// head_dim. Its HF import reads theta too (hfRope: both may sit in
// rope_parameters), the factor defaulting to defaultFactor.
func ropeDim(defaultFactor float64) Param {
	return Param{Key: "rope.dimension_count", HF: "partial_rotary_factor", Field: "architecture.attention.partial_rotary_factor × head_dim", Type: Uint,
		FromHF: hfRope(defaultFactor),
		Get:    func(a *models.Architecture) (Value, error) { return Value{Int: a.Attention.RotaryDim()}, nil },
		Set: func(a *models.Architecture, v Value, _ Meta) error {
			a.Attention.PartialRotaryFactor = float64(v.Int) / float64(a.Attention.HeadDim)
			return nil
		}}
}

// floatParam is a float field; exact says whether the config takes the
// float32 as widened (else as the shortest decimal that reads back as it).
func floatParam(key, hf, name string, ptr func(a *models.Architecture) *float64, shortest bool) Param {
	return Param{Key: key, HF: hf, HFAsIs: true, Field: name, Type: Float,
		FromHF: func(a *models.Architecture, r *hfReader) { *ptr(a) = r.reqFloat(hf) },
		Get:    func(a *models.Architecture) (Value, error) { return Value{Float: *ptr(a)}, nil },
		Set: func(a *models.Architecture, v Value, _ Meta) error {
			*ptr(a) = v.Float
			if shortest {
				*ptr(a) = shortest32(v.Float)
			}
			return nil
		}}
}

func rmsEps(shortest bool) Param {
	return floatParam("attention.layer_norm_rms_epsilon", "rms_norm_eps", "architecture.rms_norm_eps", func(a *models.Architecture) *float64 { return &a.RMSNormEps }, shortest)
}

// ropeTheta's HF import is ropeDim's.
func ropeTheta(shortest bool) Param {
	return withHF(floatParam("rope.freq_base", "rope_theta", "architecture.attention.rope_theta", func(a *models.Architecture) *float64 { return &a.Attention.RopeTheta }, shortest), nil)
}

// fullAttentionInterval is n such that layer i is of kind attention exactly
// when (i+1) % n == 0, as llama.cpp's full_attention_interval says.
func fullAttentionInterval(types []string, attention string) (int, error) {
	n := len(types) + 1 // no attention layer at all
	if i := slices.Index(types, attention); i >= 0 {
		n = i + 1
	}
	for i, t := range types {
		if (t == attention) != ((i+1)%n == 0) {
			return 0, fmt.Errorf("layer_types %s do not repeat every %d layers (the GGUF records attention layers as a fixed interval)", strings.Join(types, ","), n)
		}
	}
	return n, nil
}

// pInterval is full_attention_interval over layers of kind attention; set
// is how a reader takes it (nil: from another key). Its HF import reads
// layer_types (renamed by rename), or derives them from the interval.
func pInterval(attention string, set func(a *models.Architecture, v Value, m Meta) error, rename func([]string) []string) Param {
	return Param{Key: "full_attention_interval", HF: "full_attention_interval", Field: "architecture.layer_types (every n-th " + attention + ")", Type: Uint,
		FromHF: hfLayerTypes(attention, rename),
		Get: func(a *models.Architecture) (Value, error) {
			n, err := fullAttentionInterval(a.LayerTypes, attention)
			return Value{Int: n}, err
		},
		Set: set}
}

// pNextN is the MTP depth (llama.cpp's "next-n" layers), written when the
// model has an MTP head; set nil: a reader does not take it. from is its
// HF import.
func pNextN(set func(a *models.Architecture, v Value, m Meta) error, from func(a *models.Architecture, r *hfReader)) Param {
	return Param{Key: gguf.KeyNextNLayers, HF: "num_nextn_predict_layers", Field: "architecture.mtp.num_layers", Type: Uint, Optional: true,
		FromHF: from,
		Get:    func(a *models.Architecture) (Value, error) { return Value{Int: a.MTP.NumLayers}, nil },
		Set:    set,
		When:   func(a *models.Architecture) bool { return a.MTP.NumLayers > 0 }}
}

// gatedEvery adds to errs what both architectures' keys cannot express:
// ungated attention, and attention layers at other than a fixed interval.
func gatedEvery(a *models.Architecture, name, attention string, errs []error) []error {
	if !a.Attention.OutputGate {
		errs = slices.Insert(errs, 0, fmt.Errorf("attention.output_gate is false (%s GGUF assumes gated attention)", name))
	}
	if _, err := fullAttentionInterval(a.LayerTypes, attention); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// qwenDefaults sets on a config read from f what both architectures take
// from tensors (the vocabulary: token_embd's rows; tied embeddings: no
// output.weight) and what no key says, as HF's configs have it: silu, gated
// attention, the GDN output gate gateAct, normalised top-k, MoE in every
// layer, and the tokenizer's EOS when no key gave one.
func qwenDefaults(f *gguf.File, a *models.Architecture, gateAct string) error {
	if err := vocabAndTie(f, a); err != nil {
		return err
	}
	a.HiddenAct = "silu"
	a.Attention.OutputGate = true
	a.LinearAttention.GateAct = gateAct
	a.MoE.NormTopKProb, a.MoE.DecoderSparseStep = true, 1
	if len(a.EOSTokenIDs) == 0 {
		eos, err := eosOf(f)
		if err != nil {
			return err
		}
		if eos >= 0 {
			a.EOSTokenIDs = []int{eos}
		}
	}
	return nil
}

// vocabAndTie reads the vocabulary size and tied embeddings from tensors.
func vocabAndTie(f *gguf.File, a *models.Architecture) error {
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || len(emb.Dims) != 2 {
		return fmt.Errorf("gguf %s has no 2-D token_embd.weight to take the vocabulary size from", f.Path)
	}
	if emb.Dims[1] > math.MaxInt32 {
		return fmt.Errorf("gguf %s: token_embd.weight has %d rows, out of range", f.Path, emb.Dims[1])
	}
	a.VocabSize = int(emb.Dims[1])
	a.TieWordEmbeddings = !f.Has("output.weight")
	return nil
}

// eosOf reads tokenizer.ggml.eos_token_id when present (-1: absent).
func eosOf(f *gguf.File) (int, error) {
	eos, err := f.Uint(gguf.KeyEOSID)
	if err != nil {
		return -1, nil
	}
	if eos > math.MaxInt32 {
		return -1, fmt.Errorf("gguf %s: %s = %d is out of range", f.Path, gguf.KeyEOSID, eos)
	}
	return int(eos), nil
}

// nameTr is a role stored whole: the GGUF tensor's name and value transform.
type nameTr struct {
	name string
	tr   gguf.Transform
}

// sharedLayer are the per-layer tensors both architectures name alike
// (llama.cpp's attention and MoE names), after "blk.{l}.".
var sharedLayer = map[string]nameTr{
	"attn.q":           {"attn_q.weight", gguf.Same},
	"attn.k":           {"attn_k.weight", gguf.Same},
	"attn.v":           {"attn_v.weight", gguf.Same},
	"attn.o":           {"attn_output.weight", gguf.Same},
	"attn.q_norm":      {"attn_q_norm.weight", gguf.PlusOne},
	"attn.k_norm":      {"attn_k_norm.weight", gguf.PlusOne},
	"moe.router":       {"ffn_gate_inp.weight", gguf.Same},
	"moe.experts.gate": {"ffn_gate_exps.weight", gguf.Same},
	"moe.experts.up":   {"ffn_up_exps.weight", gguf.Same},
	"moe.experts.down": {"ffn_down_exps.weight", gguf.Same},
	"moe.shared.gate":  {"ffn_gate_shexp.weight", gguf.Same},
	"moe.shared.up":    {"ffn_up_shexp.weight", gguf.Same},
	"moe.shared.down":  {"ffn_down_shexp.weight", gguf.Same},
	"moe.shared_gate":  {"ffn_gate_inp_shexp.weight", gguf.Same},
}

// withShared is an architecture's per-layer name map: own plus sharedLayer.
func withShared(own map[string]nameTr) map[string]nameTr {
	m := maps.Clone(own)
	maps.Copy(m, sharedLayer)
	return m
}

// splitLayerRole splits "layers.{l}.{sub}".
func splitLayerRole(role string) (int, string, bool) {
	rest, ok := strings.CutPrefix(role, "layers.")
	if !ok {
		return 0, "", false
	}
	num, sub, ok := strings.Cut(rest, ".")
	l, err := strconv.Atoi(num)
	if !ok || err != nil || l < 0 || strconv.Itoa(l) != num {
		return 0, "", false
	}
	return l, sub, true
}

// rowRun is rows [tensorRow, tensorRow+n) of tensor as role rows [roleRow, roleRow+n).
func rowRun(tensor string, tensorRow, roleRow, n int) gguf.RowRun {
	return gguf.RowRun{Tensor: tensor, TensorRow: tensorRow, RoleRow: roleRow, Rows: n}
}

// colRun is columns [tensorCol, tensorCol+n) of the tensor as role columns [roleCol, roleCol+n).
func colRun(tensorCol, roleCol, n int) gguf.ColRun {
	return gguf.ColRun{TensorCol: tensorCol, RoleCol: roleCol, Cols: n}
}
