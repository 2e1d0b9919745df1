package gen

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/strata-llm/strata/models/quant"
)

// formatChunks reads the decoder chunk of every format template: the
// elements one decode call yields (a multiple of 4: float4 output).
func formatChunks(fsys fs.FS) (map[string]int, error) {
	paths, err := fs.Glob(fsys, "formats/*.metal.tmpl")
	if err != nil {
		return nil, fmt.Errorf("listing MSL format templates: %w", err)
	}
	out := map[string]int{}
	for _, p := range paths {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "formats/"), ".metal.tmpl")
		f, err := quant.Lookup(name)
		if err != nil {
			return nil, fmt.Errorf("MSL decoder %s: %w", p, err)
		}
		if f.Name != name {
			return nil, fmt.Errorf("MSL decoder %s: models/quant spells the format %q", p, f.Name)
		}
		t, err := template.ParseFS(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("MSL decoder %s: %w", p, err)
		}
		var b bytes.Buffer
		if err := t.ExecuteTemplate(&b, name+".chunk", nil); err != nil {
			return nil, fmt.Errorf("MSL decoder %s: its %s.chunk template: %w", p, name, err)
		}
		chunk, err := strconv.Atoi(strings.TrimSpace(b.String()))
		if err != nil || chunk <= 0 || chunk%4 != 0 || (chunk%f.BlockElems != 0 && f.BlockElems%chunk != 0) {
			return nil, fmt.Errorf("MSL decoder %s: chunk %q must be a positive multiple of 4 that divides or is divided by the block size %d", p, b.String(), f.BlockElems)
		}
		if _, err := formatTables(t, name); err != nil {
			return nil, fmt.Errorf("MSL decoder %s: %w", p, err)
		}
		out[name] = chunk
	}
	return out, nil
}

// formatTables lists the lookup tables the decoder of format name reads:
// the names its optional <name>.tables template gives, separated by
// blanks, each one of lookupTables.
func formatTables(t *template.Template, name string) ([]string, error) {
	tt := t.Lookup(name + ".tables")
	if tt == nil {
		return nil, nil
	}
	var b bytes.Buffer
	if err := tt.Execute(&b, nil); err != nil {
		return nil, fmt.Errorf("its %s.tables template: %w", name, err)
	}
	names := strings.Fields(b.String())
	for _, n := range names {
		if _, ok := lookupTables[n]; !ok {
			return nil, fmt.Errorf("its %s.tables template names %q, not a lookup table the generator has (%v)", name, n, slices.Sorted(maps.Keys(lookupTables)))
		}
	}
	return names, nil
}

// lookupTable is a constant array decoders may read, generated from the
// tables models/quant parses and checks (ggml_tables.json), never typed in.
type lookupTable struct {
	typ     string // MSL element type
	comment string
	perLine int
	values  func() []string // MSL literals, in order
}

// lookupTables are the tables a format's <name>.tables may name.
var lookupTables = map[string]lookupTable{
	"iq2xs_grid": {"ulong", "IQ2_XS: 512 grid points of eight magnitudes (8, 25 or 43); byte j (little-endian) is element j", 4, func() []string {
		var out []string
		for _, v := range quant.IQ2XSGrid() {
			out = append(out, fmt.Sprintf("0x%016xul", v))
		}
		return out
	}},
	"iq2xxs_grid": {"ulong", "IQ2_XXS: 256 grid points of eight magnitudes (8, 25 or 43); byte j (little-endian) is element j", 4, func() []string {
		var out []string
		for _, v := range quant.IQ2XXSGrid() {
			out = append(out, fmt.Sprintf("0x%016xul", v))
		}
		return out
	}},
	"iq3xxs_grid": {"uint", "IQ3_XXS: 256 grid points of four magnitudes; byte j (little-endian) is element j", 8, func() []string {
		var out []string
		for _, v := range quant.IQ3XXSGrid() {
			out = append(out, fmt.Sprintf("0x%08xu", v))
		}
		return out
	}},
	"iq2s_grid": {"ulong", "IQ2_S: 1024 grid points of eight magnitudes (models/quant/ggml_iq_grids.json.gz)", 4, func() []string {
		var out []string
		for _, v := range quant.IQ2SGrid() {
			out = append(out, fmt.Sprintf("0x%016xul", v))
		}
		return out
	}},
	"iq3s_grid": {"uint", "IQ3_S: 512 grid points of four magnitudes (models/quant/ggml_iq_grids.json.gz)", 8, func() []string {
		var out []string
		for _, v := range quant.IQ3SGrid() {
			out = append(out, fmt.Sprintf("0x%08xu", v))
		}
		return out
	}},
	"iq1s_grid": {"ulong", "IQ1_S, IQ1_M: 2048 grid points of eight int8 values in {-1, 0, 1} (models/quant/ggml_iq_grids.json.gz)", 4, func() []string {
		var out []string
		for _, v := range quant.IQ1SGrid() {
			out = append(out, fmt.Sprintf("0x%016xul", v))
		}
		return out
	}},
	"ksigns_iq2xs": {"uchar", "IQ2_XS, IQ2_XXS, IQ3_XXS: 7-bit sign index → the signs of eight elements (bit j set: element j negative)", 16, func() []string {
		var out []string
		for _, v := range quant.IQ2XSSigns() {
			out = append(out, fmt.Sprintf("0x%02x", v))
		}
		return out
	}},
	"kvalues_iq4nl": {"float", "IQ4_NL, IQ4_XS: the 16 levels of a 4-bit code (int8 in ggml; float here, the decoders multiply)", 16, func() []string {
		var out []string
		for _, v := range quant.IQ4NLValues() {
			out = append(out, fmt.Sprintf("%d.0f", v))
		}
		return out
	}},
}

// emit writes the table as a program-scope constant array.
func (lt lookupTable) emit(out *bytes.Buffer, name string) {
	vals := lt.values()
	fmt.Fprintf(out, "// %s\nconstexpr constant %s %s[%d] = {\n", lt.comment, lt.typ, name, len(vals))
	for i := 0; i < len(vals); i += lt.perLine {
		fmt.Fprintf(out, "    %s,\n", strings.Join(vals[i:min(i+lt.perLine, len(vals))], ", "))
	}
	out.WriteString("};\n")
}

func sortedKeys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
