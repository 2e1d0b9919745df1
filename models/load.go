package models

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// optionalFields are the dotted model.toml paths that may be left out; every
// other field is required so that a forgotten key never silently becomes 0.
var optionalFields = map[string]bool{
	"runtime.threads":                          true,
	"runtime.moce":                             true,
	"runtime.moce_lambda":                      true,
	"runtime.moce_protect":                     true,
	"runtime.moce_max_rank":                    true,
	"runtime.read_ahead":                       true,
	"architecture.moe.mlp_only_layers":         true,
	"architecture.moe.dense_intermediate_size": true,
	"architecture.mtp.num_layers":              true,
	"architecture.eos_token_ids":               true,
	"quant.rows":                               true,
	"quant.router":                             true,
	// Tables of features one model type has and another lacks; Validate
	// checks each model type has the ones it needs.
	"architecture.hyper_connections": true,
	"architecture.indexer":           true,
	"architecture.ple":               true,
}

// expectations says what a field should hold where its Go type alone says too
// little; used in "missing" messages.
var expectations = map[string]string{
	"name":                                   "a string naming the model folder, e.g. \"tiny-a\"",
	"architecture.model_type":                fmt.Sprintf("%q or %q", TypeQwen3Next, TypeQwen4Exp),
	"architecture.layer_types":               fmt.Sprintf("an array of %q, %q or %q, one per layer", LayerLinearAttention, LayerFullAttention, LayerSparseAttention),
	"architecture.linear_attention.gate_act": `"silu" or "sigmoid"`,
	"architecture.hidden_act":                `"silu"`,
	"quant.trunk":                            "a quant format name",
	"quant.experts":                          "a quant format name",
	"quant.embeddings":                       "a quant format name",
	"quant.head":                             "a quant format name",
	"quant.rows":                             `"fallback", "pad" or "smallest"`,
	"architecture.rms_norm_eps":              "a positive number",
	"architecture.attention.partial_rotary_factor": "a number in (0, 1]",
	"architecture.moe.decoder_sparse_step":         "1",
}

// FieldError is one problem with one field of a config. Field is the dotted
// model.toml path (or the HF key, for an HF import).
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Msg }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Load reads and validates the model.toml at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading model config: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes and validates a model.toml; name (usually its path) prefixes
// every error. Unknown keys and missing required fields are reported before
// semantic checks, since zero values would only produce confusing echoes.
func Parse(data []byte, name string) (*Config, error) {
	var c Config
	md, err := toml.Decode(string(data), &c)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var errs []error
	errs = append(errs, unknownKeys(md)...)
	errs = append(errs, missingFields(md, reflect.TypeOf(c), nil)...)
	if len(errs) > 0 {
		return nil, InFile(name, errors.Join(errs...))
	}
	c.normalize()
	if err := c.Validate(); err != nil {
		return nil, InFile(name, err)
	}
	return &c, nil
}

// normalize makes empty lists nil so that a config compares equal whether a
// list was written as [] or left out.
func (c *Config) normalize() {
	if len(c.Architecture.LayerTypes) == 0 {
		c.Architecture.LayerTypes = nil
	}
	if len(c.Architecture.MoE.MLPOnlyLayers) == 0 {
		c.Architecture.MoE.MLPOnlyLayers = nil
	}
	if len(c.Architecture.EOSTokenIDs) == 0 {
		c.Architecture.EOSTokenIDs = nil
	}
	if len(c.Architecture.PLE.LayerIDs) == 0 {
		c.Architecture.PLE.LayerIDs = nil
	}
}

// InFile prefixes every error joined in err with the file name, so each line
// of a multi-problem report says where it comes from.
func InFile(name string, err error) error {
	if name == "" || err == nil {
		return err
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range joined.Unwrap() {
			out = append(out, fmt.Errorf("%s: %w", name, e))
		}
		return errors.Join(out...)
	}
	return fmt.Errorf("%s: %w", name, err)
}

// schemaKeys lists every dotted path the Config type accepts, tables included.
func schemaKeys(t reflect.Type, prefix string, out map[string]bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := tomlName(f)
		if tag == "" {
			continue
		}
		path := joinPath(prefix, tag)
		out[path] = true
		if f.Type.Kind() == reflect.Struct {
			schemaKeys(f.Type, path, out)
		}
	}
}

// unknownKeys reports keys the schema does not have. Beyond md.Undecoded it
// also catches keys that differ only in case, which the decoder would
// otherwise accept silently. Only the outermost unknown key of a subtree is
// reported.
func unknownKeys(md toml.MetaData) []error {
	known := map[string]bool{}
	schemaKeys(reflect.TypeOf(Config{}), "", known)
	bad := map[string]toml.Key{}
	for _, k := range md.Undecoded() {
		bad[k.String()] = k
	}
	for _, k := range md.Keys() {
		if !known[dotted(k)] {
			bad[k.String()] = k
		}
	}
	var names []string
	for s, k := range bad {
		if _, parentBad := bad[toml.Key(k[:len(k)-1]).String()]; len(k) > 1 && parentBad {
			continue
		}
		names = append(names, s)
	}
	sort.Strings(names)
	var errs []error
	for _, s := range names {
		k := bad[s]
		msg := "unknown key"
		if guess := closestKey(known, k); guess != "" {
			msg += fmt.Sprintf(" (did you mean %s?)", guess)
		}
		errs = append(errs, fieldErr(s, "%s", msg))
	}
	return errs
}

// dotted joins a key without quoting, to match schema paths.
func dotted(k toml.Key) string { return strings.Join(k, ".") }

// closestKey suggests a schema key in the same table within a small edit
// distance of the unknown key's last piece.
func closestKey(known map[string]bool, k toml.Key) string {
	parent := strings.Join(k[:len(k)-1], ".")
	last := k[len(k)-1]
	best, bestDist := "", 3
	for path := range known {
		p, name := "", path
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			p, name = path[:i], path[i+1:]
		}
		if p != parent {
			continue
		}
		d := editDistance(strings.ToLower(last), name)
		if d < bestDist || (d == bestDist && name < best) {
			best, bestDist = name, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// missingFields walks t's toml tags and reports required fields the document
// does not define. A missing table with required fields is reported once.
func missingFields(md toml.MetaData, t reflect.Type, prefix []string) []error {
	var errs []error
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := tomlName(f)
		if tag == "" {
			continue
		}
		key := append(append([]string(nil), prefix...), tag)
		path := strings.Join(key, ".")
		defined := md.IsDefined(key...)
		if f.Type.Kind() == reflect.Struct {
			if defined {
				errs = append(errs, missingFields(md, f.Type, key)...)
			} else if hasRequired(f.Type, path) && !optionalFields[path] {
				errs = append(errs, fieldErr(path, "missing table (expected a [%s] section)", path))
			}
			continue
		}
		if !defined && !optionalFields[path] {
			errs = append(errs, fieldErr(path, "missing (expected %s)", expectation(path, f.Type)))
		}
	}
	return errs
}

func hasRequired(t reflect.Type, prefix string) bool {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := tomlName(f)
		if tag == "" {
			continue
		}
		path := joinPath(prefix, tag)
		if f.Type.Kind() == reflect.Struct {
			if hasRequired(f.Type, path) {
				return true
			}
		} else if !optionalFields[path] {
			return true
		}
	}
	return false
}

func expectation(path string, t reflect.Type) string {
	if e, ok := expectations[path]; ok {
		return e
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int:
		return "a positive integer"
	case reflect.Float64:
		return "a positive number"
	case reflect.Bool:
		return "true or false"
	case reflect.Slice:
		return "an array"
	}
	return t.String()
}

// tomlName is the key a struct field is stored under, "" for skipped fields.
func tomlName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	if tag == "-" {
		return ""
	}
	if tag == "" {
		return f.Name
	}
	return tag
}

func joinPath(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}
