package models

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/strata-llm/strata/internal/outfile"
	"github.com/strata-llm/strata/models/quant"
)

// sectionDocs and fieldDocs become comments in a written model.toml, so the
// file explains itself without a trip to config.go.
var sectionDocs = map[string]string{
	"architecture":                   "HF config fields that change the math",
	"architecture.attention":         "full-attention layers: gated output, partial RoPE, grouped KV heads",
	"architecture.linear_attention":  "Gated DeltaNet layers",
	"architecture.moe":               "sparse MLP: routed experts plus a shared expert",
	"architecture.mtp":               "multi-token-prediction head (0 layers: none)",
	"architecture.hyper_connections": "qwen4_exp: the residual is count streams, mixed through gated residual blocks",
	"architecture.indexer":           "qwen4_exp: QSA block selection (pooled keys of compress_ratio tokens, top budget/ratio blocks)",
	"architecture.ple":               "qwen4_exp: the hashed n-gram store and the PLE layers (1-based layer_ids) that read it",
	"quant":                          "storage format per tensor class; norms, gates and other small vectors stay f32",
	"windows":                        "window shapes to generate: decode rows 1 … max_decode_rows, and prefill chunks",
	"runtime":                        "defaults the runtime starts from; flags override them",
}

var fieldDocs = map[string]string{
	"architecture.attention.output_gate":       "q_proj carries a sigmoid gate half per head",
	"architecture.moe.decoder_sparse_step":     "1: every layer is MoE",
	"architecture.moe.dense_intermediate_size": "HF intermediate_size; used only by mlp_only_layers",
	"runtime.context_length":                   "KV cache rows per attention layer",
	"runtime.threads":                          "0: one per core",
	"quant.rows":                               "rows that are not whole blocks: fallback (default, llama.cpp's), pad or smallest (in memory only) (quant.ForRow)",
	"quant.router":                             "the MoE routers' format (empty: the trunk's)",
}

// MarshalTOML renders c as a model.toml: sections in struct order, every
// field written (optional ones too, so the file shows all knobs), the same
// bytes for the same Config.
func (c *Config) MarshalTOML() ([]byte, error) { return c.MarshalTOMLFrom("") }

// MarshalTOMLFrom is MarshalTOML with a header naming the HF config.json c
// was imported from ("" for none).
func (c *Config) MarshalTOMLFrom(source string) ([]byte, error) {
	var b bytes.Buffer
	if source != "" {
		fmt.Fprintf(&b, "# Written by `stratagen import-hf` from %s.\n", filepath.ToSlash(source))
	} else {
		b.WriteString("# Written by stratagen.\n")
	}
	b.WriteString("# Field meanings: models/config.go. Quant formats: " + strings.Join(quant.Names(), ", ") + ".\n\n")
	if err := writeTable(&b, "", reflect.ValueOf(*c)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// WriteFile writes c as a model.toml at path, atomically.
func WriteFile(path string, c *Config) error {
	data, err := c.MarshalTOML()
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return WriteAtomic(path, data)
}

// WriteAtomic replaces path with data through a temp file in the same
// directory and a rename, so readers never see a half-written file.
func WriteAtomic(path string, data []byte) error {
	return outfile.WriteFile(path, data)
}

// writeTable writes v's plain keys, then its sub-tables, each in field order.
func writeTable(b *bytes.Buffer, prefix string, v reflect.Value) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		name := tomlName(t.Field(i))
		if name == "" || t.Field(i).Type.Kind() == reflect.Struct {
			continue
		}
		path := joinPath(prefix, name)
		if k := v.Field(i).Kind(); optionalFields[path] && (k == reflect.Slice || k == reflect.String) && v.Field(i).Len() == 0 {
			continue
		}
		val, err := formatValue(v.Field(i))
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		b.WriteString(name + " = " + val)
		if doc := fieldDocs[path]; doc != "" {
			b.WriteString(" # " + doc)
		}
		b.WriteByte('\n')
	}
	for i := 0; i < t.NumField(); i++ {
		name := tomlName(t.Field(i))
		if name == "" || t.Field(i).Type.Kind() != reflect.Struct {
			continue
		}
		path := joinPath(prefix, name)
		if optionalFields[path] && v.Field(i).IsZero() {
			continue // a feature the model does not have
		}
		b.WriteString("\n[" + path + "]")
		if doc := sectionDocs[path]; doc != "" {
			b.WriteString(" # " + doc)
		}
		b.WriteByte('\n')
		if err := writeTable(b, path, v.Field(i)); err != nil {
			return err
		}
	}
	return nil
}

// arrayItemsPerLine keeps long arrays readable; 4 also shows qwen3_next's
// three-linear-one-full layer pattern one group per line.
const arrayItemsPerLine = 4

func formatValue(v reflect.Value) (string, error) {
	switch v.Kind() {
	case reflect.String:
		return quoteTOML(v.String())
	case reflect.Int:
		return strconv.FormatInt(v.Int(), 10), nil
	case reflect.Float64:
		return formatFloat(v.Float()), nil
	case reflect.Bool:
		return strconv.FormatBool(v.Bool()), nil
	case reflect.Slice:
		items := make([]string, v.Len())
		for i := range items {
			s, err := formatValue(v.Index(i))
			if err != nil {
				return "", fmt.Errorf("[%d]: %w", i, err)
			}
			items[i] = s
		}
		if len(items) <= arrayItemsPerLine {
			return "[" + strings.Join(items, ", ") + "]", nil
		}
		var s strings.Builder
		s.WriteString("[\n")
		for i := 0; i < len(items); i += arrayItemsPerLine {
			line := items[i:min(i+arrayItemsPerLine, len(items))]
			s.WriteString("  " + strings.Join(line, ", ") + ",\n")
		}
		s.WriteString("]")
		return s.String(), nil
	}
	return "", fmt.Errorf("cannot write a %s", v.Type())
}

// formatFloat writes the shortest text that parses back to the same float,
// always recognisably a TOML float (10000.0, not 10000).
func formatFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	var s string
	if a := math.Abs(f); a == 0 || (a >= 1e-5 && a < 1e15) {
		s = strconv.FormatFloat(f, 'f', -1, 64)
	} else {
		s = strconv.FormatFloat(f, 'e', -1, 64)
	}
	if !strings.ContainsAny(s, ".e") {
		s += ".0"
	}
	return s
}

// quoteTOML writes a TOML basic string. Go's %q is not usable: TOML has no \x escape.
func quoteTOML(s string) (string, error) {
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("string %q is not valid UTF-8", s)
	}
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}
