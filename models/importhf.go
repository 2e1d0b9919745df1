package models

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
)

// ImportOptions are the parts of a model.toml that an HF config.json does not say.
type ImportOptions struct {
	Name          string // model folder name; required
	ContextLength int    // 0: min(max_position_embeddings, 32768)
	MaxDecodeRows int    // 0: 4
	PrefillRows   int    // 0: 64
	Source        string // the config.json path, used to prefix errors; may be empty
}

// Defaults ImportHF applies for zero ImportOptions fields.
const (
	DefaultContextCap    = 32768
	DefaultMaxDecodeRows = 4
	DefaultPrefillRows   = 64
)

// supportedHFTypes are the HF model_type values ImportHF understands.
var supportedHFTypes = []string{TypeQwen3Next, TypeQwen4Exp, "qwen4_exp_text"}

// ImportHF builds a validated Config from an HF config.json. Errors name the
// HF key; problems found by Validate afterwards name the model.toml field.
func ImportHF(configJSON []byte, opts ImportOptions) (*Config, error) {
	c, err := importHF(configJSON)
	if err != nil {
		return nil, inFile(opts.Source, err)
	}
	return Imported(c, opts)
}

// Imported completes an architecture read from a model's own description
// (an HF config.json, a GGUF file's metadata): the name, windows and context
// length of opts (their defaults for zero fields), then validation, whose
// errors name opts.Source and the model.toml field.
func Imported(c *Config, opts ImportOptions) (*Config, error) {
	c.Name = opts.Name
	c.Windows.MaxDecodeRows = orDefault(opts.MaxDecodeRows, DefaultMaxDecodeRows)
	c.Windows.PrefillRows = orDefault(opts.PrefillRows, DefaultPrefillRows)
	c.Runtime.ContextLength = opts.ContextLength
	if c.Runtime.ContextLength == 0 {
		c.Runtime.ContextLength = min(c.Architecture.Attention.MaxPositions, DefaultContextCap)
	}
	c.normalize()
	if err := c.Validate(); err != nil {
		return nil, inFile(opts.Source, prefixEach("imported config is invalid", err))
	}
	return c, nil
}

func importHF(configJSON []byte) (*Config, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(configJSON, &m); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if m == nil {
		return nil, errors.New("not a JSON object: null")
	}
	r := &hfReader{m: m}

	modelType, ok := r.str("model_type")
	if !ok {
		if !r.has("model_type") {
			r.missing("model_type", fmt.Sprintf("one of %s", strings.Join(supportedHFTypes, ", ")))
		}
		return nil, r.err()
	}
	if !slices.Contains(supportedHFTypes, modelType) {
		return nil, fieldErr("model_type", "%q is not supported (supported: %s)", modelType, strings.Join(supportedHFTypes, ", "))
	}
	if modelType == "qwen4_exp_text" {
		modelType = TypeQwen4Exp
	} else if modelType == TypeQwen4Exp && r.has("text_config") {
		// The multimodal release nests the decoder's fields in text_config.
		var tc map[string]json.RawMessage
		if err := json.Unmarshal(r.m["text_config"], &tc); err != nil {
			return nil, fieldErr("text_config", "expected an object: %v", err)
		}
		r = &hfReader{m: tc, prefix: "text_config."}
	}
	qwen4 := modelType == TypeQwen4Exp

	var c Config
	a := &c.Architecture
	a.ModelType = modelType
	a.HiddenSize = r.reqInt("hidden_size")
	a.NumLayers = r.reqInt("num_hidden_layers")
	a.VocabSize = r.reqInt("vocab_size")
	a.RMSNormEps = r.reqFloat("rms_norm_eps")
	a.HiddenAct = r.reqStr("hidden_act")
	a.TieWordEmbeddings = r.reqBool("tie_word_embeddings")
	attention := LayerFullAttention
	if qwen4 {
		attention = LayerSparseAttention
	}
	if r.has("layer_types") {
		a.LayerTypes = r.stringList("layer_types")
		if qwen4 {
			a.LayerTypes = qwen4LayerTypes(a.LayerTypes)
		}
	} else {
		a.LayerTypes = deriveLayerTypes(r, a.NumLayers, attention)
	}
	a.EOSTokenIDs = eosIDs(r)

	// Unsupported variants that would otherwise be dropped silently and change the math.
	if b, ok := r.bool("attention_bias"); ok && b {
		r.fail("attention_bias", "is true (expected false: attention projections without bias)")
	}
	checkRopeScaling(r)

	at := &a.Attention
	at.NumHeads = r.reqInt("num_attention_heads")
	at.NumKVHeads = r.reqInt("num_key_value_heads")
	if hd, ok := r.int("head_dim"); ok {
		at.HeadDim = hd
	} else if at.NumHeads > 0 {
		at.HeadDim = a.HiddenSize / at.NumHeads // HF's fallback
	}
	defaultFactor := 0.25 // qwen3_next's config default
	if qwen4 {
		defaultFactor = 1.0 // 5.17.0's rotary code default
	}
	at.RopeTheta, at.PartialRotaryFactor = ropeParams(r, defaultFactor)
	at.OutputGate = true // both families gate the attention output
	at.MaxPositions = r.reqInt("max_position_embeddings")

	la := &a.LinearAttention
	la.NumKeyHeads = r.reqInt("linear_num_key_heads")
	la.NumValueHeads = r.reqInt("linear_num_value_heads")
	la.KeyHeadDim = r.reqInt("linear_key_head_dim")
	la.ValueHeadDim = r.reqInt("linear_value_head_dim")
	la.ConvKernel = r.reqInt("linear_conv_kernel_dim")
	la.GateAct = "silu" // fixed in qwen3_next's RMSNormGated
	if qwen4 {
		la.GateAct = a.HiddenAct
		if g, ok := r.str("output_gate_type"); ok {
			la.GateAct = g
		}
	}

	moe := &a.MoE
	moe.NumExperts = r.reqInt("num_experts")
	moe.ExpertsPerToken = r.reqInt("num_experts_per_tok")
	moe.IntermediateSize = r.reqInt("moe_intermediate_size")
	moe.SharedExpertIntermediateSize = r.reqInt("shared_expert_intermediate_size")
	if qwen4 { // every qwen4_exp layer is MoE; norm_topk_prob defaults to true
		moe.NormTopKProb = true
		if b, ok := r.bool("norm_topk_prob"); ok {
			moe.NormTopKProb = b
		}
		moe.DecoderSparseStep = 1
	} else {
		moe.NormTopKProb = r.reqBool("norm_topk_prob")
		moe.DecoderSparseStep = r.reqInt("decoder_sparse_step")
	}
	if r.has("mlp_only_layers") {
		moe.MLPOnlyLayers = r.intList("mlp_only_layers")
	}
	moe.DenseIntermediateSize, _ = r.int("intermediate_size")

	// vLLM reads the MTP depth from num_nextn_predict_layers; absent means none.
	a.MTP.NumLayers, _ = r.int("num_nextn_predict_layers")
	if qwen4 {
		a.MTP.NumLayers, _ = r.int("mtp_num_hidden_layers")
		importQwen4(r, a)
	}

	format := quantFromDType(r)
	c.Quant = QuantPlan{Trunk: format, Experts: format, Embeddings: format, Head: format}

	if err := r.err(); err != nil {
		return nil, err
	}
	return &c, nil
}

// importQwen4 reads the hyper-connection, QSA indexer and PLE fields, with
// 5.17.0's defaults (configuration_qwen4_exp.py).
func importQwen4(r *hfReader, a *Architecture) {
	intOr := func(key string, def int) int {
		if v, ok := r.int(key); ok {
			return v
		}
		return def
	}
	a.HyperConnections = HyperConnections{Count: intOr("hc_count", 4), LowRank: intOr("hc_lowrank", 320)}
	a.Indexer = Indexer{
		Heads: r.reqInt("indexer_n_heads"), KVHeads: r.reqInt("indexer_kv_heads"), HeadDim: r.reqInt("indexer_head_dim"),
		Budget: r.reqInt("indexer_budget"), CompressRatio: r.reqInt("indexer_compress_ratio"),
	}
	ids := r.intList("ple_layer_ids")
	slices.Sort(ids)
	ids = slices.Compact(ids) // HF sorts and de-duplicates in __post_init__
	if len(ids) == 0 {
		return
	}
	a.PLE = PLE{
		LayerIDs:         ids,
		EmbedDim:         intOr("ple_embed_dim", a.HiddenSize),
		ConvKernel:       intOr("ple_conv_kernel_size", 4),
		NgramSize:        intOr("ngram_size", 3),
		HeadsPerNgram:    intOr("heads_per_ngram", 8),
		VocabSizeBase:    intOr("ngram_vocab_size_base", 20_000_000),
		VocabDivisibleBy: intOr("make_ngram_vocab_size_divisible_by", 128),
		Seed:             intOr("seed", 1234),
		SplitParts:       intOr("split_ngram_parts", 512),
	}
}

// qwen4LayerTypes maps the names HF versions used for Qwen3.8-Flash-Next
// layers onto ours: 5.17.0 rewrites full_attention to qwen_sparse_attention;
// older configs said deepseek_sparse_attention, and hybrid_indexed for the
// (linear-attention) PLE layer.
func qwen4LayerTypes(in []string) []string {
	out := make([]string, len(in))
	for i, t := range in {
		switch t {
		case LayerFullAttention, "deepseek_sparse_attention":
			out[i] = LayerSparseAttention
		case "hybrid_indexed":
			out[i] = LayerLinearAttention
		default:
			out[i] = t
		}
	}
	return out
}

// eosIDs reads eos_token_id, an integer or a list.
func eosIDs(r *hfReader) []int {
	if !r.has("eos_token_id") {
		return nil
	}
	var one int
	if err := json.Unmarshal(r.m["eos_token_id"], &one); err == nil {
		return []int{one}
	}
	return r.intList("eos_token_id")
}

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

const maxDerivedLayers = 1 << 16

// deriveLayerTypes follows HF's qwen3_next config: every interval-th layer is
// full attention, the rest Gated DeltaNet.
func deriveLayerTypes(r *hfReader, n int, attention string) []string {
	interval, ok := r.int("full_attention_interval")
	if !ok {
		interval = 4
	}
	if interval < 1 {
		r.fail("full_attention_interval", "is %d (expected a positive integer)", interval)
		return nil
	}
	if n > maxDerivedLayers { // a typo here must not allocate gigabytes
		r.fail("num_hidden_layers", "is %d (expected at most %d)", n, maxDerivedLayers)
		return nil
	}
	out := make([]string, 0, max(n, 0))
	for i := 0; i < n; i++ {
		if (i+1)%interval == 0 {
			out = append(out, attention)
		} else {
			out = append(out, LayerLinearAttention)
		}
	}
	return out
}

// ropeParams reads theta and the partial rotary factor. HF 5.x keeps them in
// rope_parameters; older configs put them at the top level. qwen3_next's
// config defaults the factor to 0.25 (the generic rotary code's 1.0 never
// applies to it).
func ropeParams(r *hfReader, defaultFactor float64) (theta, factor float64) {
	theta, factor = 10000, defaultFactor
	if f, ok := r.float("rope_theta"); ok {
		theta = f
	}
	if f, ok := r.float("partial_rotary_factor"); ok {
		factor = f
	}
	if !r.has("rope_parameters") {
		return theta, factor
	}
	var rp map[string]json.RawMessage
	if err := json.Unmarshal(r.m["rope_parameters"], &rp); err != nil {
		r.fail("rope_parameters", "expected an object: %v", err)
		return theta, factor
	}
	sub := &hfReader{m: rp, prefix: "rope_parameters."}
	if t, ok := sub.str("rope_type"); ok && t != "default" {
		sub.fail("rope_type", "is %q (expected \"default\": RoPE scaling is not supported)", t)
	}
	if f, ok := sub.float("rope_theta"); ok {
		theta = f
	}
	if f, ok := sub.float("partial_rotary_factor"); ok {
		factor = f
	}
	r.errs = append(r.errs, sub.errs...)
	return theta, factor
}

// checkRopeScaling rejects the pre-5.x rope_scaling object unless it asks for
// plain RoPE.
func checkRopeScaling(r *hfReader) {
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
	r.errs = append(r.errs, fieldErr(r.prefix+key, format, args...))
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

// prefixEach puts a context phrase in front of every joined error.
func prefixEach(context string, err error) error {
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, fmt.Errorf("%s: %w", context, e))
		}
		return errors.Join(out...)
	}
	return fmt.Errorf("%s: %w", context, err)
}
