package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/strata-llm/strata/models"
)

// ImportHF builds a validated config from an HF config.json: the
// architecture its model_type names, each row of that architecture's table
// that has an HF import (Param.FromHF) reading its keys, in table order,
// then the quant plan from the checkpoint's dtype, then models.Imported
// (opts' name, windows and context; validation). Errors name the HF key;
// problems found by validation afterwards name the model.toml field.
func ImportHF(configJSON []byte, opts models.ImportOptions) (*models.Config, error) {
	c, err := importHF(configJSON)
	if err != nil {
		return nil, models.InFile(opts.Source, err)
	}
	return models.Imported(c, opts)
}

// hfTypes lists the HF model_type values ImportHF understands.
func hfTypes() []string {
	var out []string
	for _, ar := range All {
		out = append(out, ar.HFTypes...)
	}
	return out
}

// ByHFType finds the architecture of an HF model_type.
func ByHFType(t string) (*Arch, bool) {
	for _, ar := range All {
		if slices.Contains(ar.HFTypes, t) {
			return ar, true
		}
	}
	return nil, false
}

func importHF(configJSON []byte) (*models.Config, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(configJSON, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if m == nil {
		return nil, errors.New("not a JSON object: null")
	}
	r := &hfReader{m: m}

	supported := strings.Join(hfTypes(), ", ")
	modelType, ok := r.str("model_type")
	if !ok {
		if !r.has("model_type") {
			r.missing("model_type", "one of "+supported)
		}
		return nil, r.err()
	}
	ar, ok := ByHFType(modelType)
	if !ok {
		return nil, &models.FieldError{Field: "model_type", Msg: fmt.Sprintf("%q is not supported (supported: %s)", modelType, supported)}
	}
	if ar.hfNested != "" && modelType == ar.ModelType && r.has(ar.hfNested) {
		var sub map[string]json.RawMessage
		if err := json.Unmarshal(r.m[ar.hfNested], &sub); err != nil {
			return nil, &models.FieldError{Field: ar.hfNested, Msg: fmt.Sprintf("expected an object: %v", err)}
		}
		r = &hfReader{m: sub, prefix: ar.hfNested + "."}
	}

	var c models.Config
	a := &c.Architecture
	a.ModelType = ar.ModelType
	if ar.hfFixed != nil {
		ar.hfFixed(a)
	}
	for _, p := range ar.Params {
		if p.FromHF != nil {
			p.FromHF(a, r)
		}
	}
	format := quantFromDType(r)
	c.Quant = models.QuantPlan{Trunk: format, Experts: format, Embeddings: format, Head: format}
	if err := r.err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// The HF imports of the rows.

// hfInt reads a required integer into the int field of row p.
func hfInt(p Param) func(a *models.Architecture, r *hfReader) {
	return func(a *models.Architecture, r *hfReader) { *p.intField(a) = r.reqInt(p.HF) }
}

// hfOr makes row p's HF key optional, def when absent.
func hfOr(def int, p Param) Param {
	p.FromHF = func(a *models.Architecture, r *hfReader) { *p.intField(a) = r.intOr(p.HF, def) }
	return p
}

// hfOnly is a row with an HF key and no GGUF key: what a GGUF file says
// otherwise (from its tensors, or not at all).
func hfOnly(hf, field string, from func(a *models.Architecture, r *hfReader)) Param {
	return Param{HF: hf, Field: field, FromHF: from}
}

// hfOnlyInt is an hfOnly row of a required integer field.
func hfOnlyInt(hf, field string, ptr func(a *models.Architecture) *int) Param {
	return hfOnly(hf, field, func(a *models.Architecture, r *hfReader) { *ptr(a) = r.reqInt(hf) })
}

// The rows of HF keys both architectures read alike.
var (
	hfVocab = hfOnlyInt("vocab_size", "architecture.vocab_size (GGUF: token_embd's rows)", func(a *models.Architecture) *int { return &a.VocabSize })
	hfAct   = hfOnly("hidden_act", "architecture.hidden_act", func(a *models.Architecture, r *hfReader) { a.HiddenAct = r.reqStr("hidden_act") })
	hfTie   = hfOnly("tie_word_embeddings", "architecture.tie_word_embeddings (GGUF: no output.weight)", func(a *models.Architecture, r *hfReader) {
		a.TieWordEmbeddings = r.reqBool("tie_word_embeddings")
	})
	// eos_token_id is an integer or a list.
	hfEOS = hfOnly("eos_token_id", "architecture.eos_token_ids", func(a *models.Architecture, r *hfReader) {
		if !r.has("eos_token_id") {
			return
		}
		var one int
		if err := json.Unmarshal(r.m["eos_token_id"], &one); err == nil {
			a.EOSTokenIDs = []int{one}
			return
		}
		a.EOSTokenIDs = r.intList("eos_token_id")
	})
	// Unsupported variants that would otherwise be dropped silently and change the math.
	hfAttentionBias = hfOnly("attention_bias", "(none: refused when true)", func(_ *models.Architecture, r *hfReader) {
		if b, ok := r.bool("attention_bias"); ok && b {
			r.fail("attention_bias", "is true (expected false: attention projections without bias)")
		}
	})
	hfRopeScaling = hfOnly("rope_scaling", "(none: refused unless plain RoPE)", checkRopeScaling)
	hfDenseFFN    = hfOnly("intermediate_size", "architecture.moe.dense_intermediate_size", func(a *models.Architecture, r *hfReader) {
		a.MoE.DenseIntermediateSize, _ = r.int("intermediate_size")
	})
	hfMLPOnly = hfOnly("mlp_only_layers", "architecture.moe.mlp_only_layers", func(a *models.Architecture, r *hfReader) {
		if r.has("mlp_only_layers") {
			a.MoE.MLPOnlyLayers = r.intList("mlp_only_layers")
		}
	})
)

// hfHeadDim reads head_dim, or HF's fallback hidden_size / num_attention_heads.
func hfHeadDim(a *models.Architecture, r *hfReader) {
	if hd, ok := r.int("head_dim"); ok {
		a.Attention.HeadDim = hd
	} else if a.Attention.NumHeads > 0 {
		a.Attention.HeadDim = a.HiddenSize / a.Attention.NumHeads
	}
}

// hfLayerTypes reads layer_types (its names mapped by rename, nil: as
// they are), or derives them as HF's configs do: every
// full_attention_interval-th layer (default 4) is of kind attention, the
// rest Gated DeltaNet.
func hfLayerTypes(attention string, rename func([]string) []string) func(a *models.Architecture, r *hfReader) {
	return func(a *models.Architecture, r *hfReader) {
		if r.has("layer_types") {
			a.LayerTypes = r.stringList("layer_types")
			if rename != nil {
				a.LayerTypes = rename(a.LayerTypes)
			}
			return
		}
		interval := r.intOr("full_attention_interval", 4)
		if interval < 1 {
			r.fail("full_attention_interval", "is %d (expected a positive integer)", interval)
			return
		}
		n := a.NumLayers
		if n > maxLayers { // a typo here must not allocate gigabytes
			r.fail("num_hidden_layers", "is %d (expected at most %d)", n, maxLayers)
			return
		}
		a.LayerTypes = make([]string, 0, max(n, 0))
		for i := 0; i < n; i++ {
			if (i+1)%interval == 0 {
				a.LayerTypes = append(a.LayerTypes, attention)
			} else {
				a.LayerTypes = append(a.LayerTypes, models.LayerLinearAttention)
			}
		}
	}
}

// hfRope reads theta and the partial rotary factor. HF 5.x keeps them in
// rope_parameters, which wins; older configs put them at the top level.
// Theta defaults to 10000, the factor to the architecture's defaultFactor.
func hfRope(defaultFactor float64) func(a *models.Architecture, r *hfReader) {
	return func(a *models.Architecture, r *hfReader) {
		at := &a.Attention
		at.RopeTheta, at.PartialRotaryFactor = 10000, defaultFactor
		if f, ok := r.float("rope_theta"); ok {
			at.RopeTheta = f
		}
		if f, ok := r.float("partial_rotary_factor"); ok {
			at.PartialRotaryFactor = f
		}
		if !r.has("rope_parameters") {
			return
		}
		var rp map[string]json.RawMessage
		if err := json.Unmarshal(r.m["rope_parameters"], &rp); err != nil {
			r.fail("rope_parameters", "expected an object: %v", err)
			return
		}
		sub := &hfReader{m: rp, prefix: r.prefix + "rope_parameters."}
		if t, ok := sub.str("rope_type"); ok && t != "default" {
			sub.fail("rope_type", "is %q (expected \"default\": RoPE scaling is not supported)", t)
		}
		if f, ok := sub.float("rope_theta"); ok {
			at.RopeTheta = f
		}
		if f, ok := sub.float("partial_rotary_factor"); ok {
			at.PartialRotaryFactor = f
		}
		r.errs = append(r.errs, sub.errs...)
	}
}

// checkRopeScaling rejects the pre-5.x rope_scaling object unless it asks for
// plain RoPE.
func checkRopeScaling(_ *models.Architecture, r *hfReader) {
	if !r.has("rope_scaling") {
		return
	}
	var rs struct {
		RopeType string `json:"rope_type"`
		Type     string `json:"type"`
	}
	if err := json.Unmarshal(r.m["rope_scaling"], &rs); err != nil {
		r.fail("rope_scaling", "is %s (expected null or an object)", abbreviate(r.m["rope_scaling"]))
		return
	}
	t := rs.RopeType
	if t == "" {
		t = rs.Type
	}
	if t != "" && t != "default" {
		r.fail("rope_scaling", "asks for %q (expected null: RoPE scaling is not supported)", t)
	}
}

// quantFromDType keeps the checkpoint's own precision for every class.
func quantFromDType(r *hfReader) string {
	key := "dtype"
	if !r.has(key) {
		key = "torch_dtype" // transformers < 4.56
	}
	dt, ok := r.str(key)
	if !ok {
		return "bf16"
	}
	switch dt {
	case "float32":
		return "f32"
	case "bfloat16":
		return "bf16"
	case "float16":
		return "f16"
	}
	r.fail(key, "is %q (expected float32, bfloat16 or float16)", dt)
	return "bf16"
}

// hfReader reads typed values from a config.json object, collecting errors
// that name the HF key. JSON null counts as absent, as HF writes null for
// unset optional values.
type hfReader struct {
	m      map[string]json.RawMessage
	prefix string
	errs   []error
}

func (r *hfReader) err() error { return errors.Join(r.errs...) }

func (r *hfReader) fail(key, format string, args ...any) {
	r.errs = append(r.errs, &models.FieldError{Field: r.prefix + key, Msg: fmt.Sprintf(format, args...)})
}

func (r *hfReader) has(key string) bool {
	raw, ok := r.m[key]
	return ok && string(bytes.TrimSpace(raw)) != "null"
}

// get decodes key into dst; it reports false when the key is absent or has
// the wrong type (the latter also records an error).
func (r *hfReader) get(key, want string, dst any) bool {
	if !r.has(key) {
		return false
	}
	if err := json.Unmarshal(r.m[key], dst); err != nil {
		r.fail(key, "is %s (expected %s)", abbreviate(r.m[key]), want)
		return false
	}
	return true
}

func (r *hfReader) int(key string) (int, bool) {
	var f float64
	if !r.get(key, "an integer", &f) {
		return 0, false
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		r.fail(key, "is %v (expected an integer)", f)
		return 0, false
	}
	return int(f), true
}

// intOr is int with a default for an absent (or wrong) value.
func (r *hfReader) intOr(key string, def int) int {
	if v, ok := r.int(key); ok {
		return v
	}
	return def
}

func (r *hfReader) float(key string) (float64, bool) {
	var f float64
	ok := r.get(key, "a number", &f)
	return f, ok
}

func (r *hfReader) str(key string) (string, bool) {
	var s string
	ok := r.get(key, "a string", &s)
	return s, ok
}

func (r *hfReader) bool(key string) (bool, bool) {
	var b bool
	ok := r.get(key, "true or false", &b)
	return b, ok
}

func (r *hfReader) stringList(key string) []string {
	var s []string
	r.get(key, "an array of strings", &s)
	return s
}

func (r *hfReader) intList(key string) []int {
	var s []int
	r.get(key, "an array of integers", &s)
	return s
}

func (r *hfReader) missing(key, want string) {
	if _, present := r.m[key]; present {
		r.fail(key, "is null (expected %s)", want)
		return
	}
	r.fail(key, "missing (expected %s)", want)
}

func (r *hfReader) reqInt(key string) int {
	v, ok := r.int(key)
	if !ok && !r.has(key) {
		r.missing(key, "an integer")
	}
	return v
}

func (r *hfReader) reqFloat(key string) float64 {
	v, ok := r.float(key)
	if !ok && !r.has(key) {
		r.missing(key, "a number")
	}
	return v
}

func (r *hfReader) reqStr(key string) string {
	v, ok := r.str(key)
	if !ok && !r.has(key) {
		r.missing(key, "a string")
	}
	return v
}

func (r *hfReader) reqBool(key string) bool {
	v, ok := r.bool(key)
	if !ok && !r.has(key) {
		r.missing(key, "true or false")
	}
	return v
}

// abbreviate shows a JSON value in an error without flooding it.
func abbreviate(raw json.RawMessage) string {
	s := string(bytes.TrimSpace(raw))
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}
