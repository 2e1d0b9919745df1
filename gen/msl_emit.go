package gen

import (
	"bytes"
	"fmt"
	"io/fs"
	"regexp"
	"strings"
	"text/template"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models/quant"
)

// MSL emits the library's kernels.metal.
func (l *Library) MSL() ([]byte, error) {
	src, err := l.emit(l.templates)
	if err != nil {
		return nil, err
	}
	if err := l.CheckSource(src); err != nil {
		return nil, err
	}
	return src, nil
}

// only is the part of the library that holds the kernels of one family
// (the broken-template tests type-check families one at a time).
func (l *Library) only(family graph.Family) *Library {
	sub := *l
	sub.Kernels, sub.Families, sub.Formats, sub.Pipelines, sub.Missing = nil, nil, nil, nil, nil
	formats := map[string]bool{}
	for _, k := range l.Kernels {
		if k.Family.Name == family {
			sub.Kernels = append(sub.Kernels, k)
			if k.Format != "" {
				formats[k.Format] = true
			}
		}
	}
	for _, f := range l.Families {
		if f.Name == family {
			sub.Families = append(sub.Families, f)
		}
	}
	for _, name := range l.Formats {
		if formats[name] {
			sub.Formats = append(sub.Formats, name)
		}
	}
	for _, p := range l.Pipelines {
		if k, ok := l.Kernel(p.Kernel); ok && k.Family.Name == family {
			sub.Pipelines = append(sub.Pipelines, p)
		}
	}
	return &sub
}

// kernelData is what a family template sees for one kernel.
type kernelData struct {
	*Kernel
	Lib *Library
}

// Fmt is the storage format whose decoder the kernel calls.
func (k kernelData) Fmt() string { return k.Format }

// Has reports whether the kernel has a binding called name.
func (k kernelData) Has(name string) bool {
	for _, b := range k.Buffers {
		if b.Name == name {
			return true
		}
	}
	return false
}

// FC names the MSL constant holding the family's function constant name
// (with its default applied when it is optional); an undeclared name fails
// generation.
func (k kernelData) FC(name graph.ConstName) (string, error) {
	c, ok := k.Family.Const(name)
	if !ok {
		return "", fmt.Errorf("template %s: %s is not a function constant of the family", k.Family.Name, name)
	}
	ident, derived := k.Family.Name.ConstIdents(name)
	if c.Optional {
		return derived, nil
	}
	return ident, nil
}

// paramsHeader is the params header as the MSL prelude declares it: the word
// indices the host writes the header's fields at (graph.Param*Word), so that
// no template spells an index.
var paramsHeader = []BakedConst{
	{"params_rows", graph.ParamRowsWord, "graph.ParamRows: live rows of this window (at most the graph's rows)"},
	{"params_pos", graph.ParamPosWord, "graph.ParamPos: position of row 0"},
	{"params_tokens", graph.ParamTokensWord, "graph.ParamTokens: token ids of the live rows, one word each"},
}

// hardIndex finds a template reading the params header at a literal index.
var hardIndex = regexp.MustCompile(`\bparams\[\s*\d`)

// preludeData is what the prelude template sees.
type preludeData struct {
	*Library
	Baked   []BakedConst // those the kernels use
	Params  []BakedConst // the params header's word indices (graph.Param*Word)
	Structs []string     // MSL argument struct definitions
	FCs     []fcDecl
}

type fcDecl struct {
	Comment  string // set on the first constant of a block
	Type     string
	Ident    string
	Index    int
	Optional bool
	Default  int64
	Name     string // derived constant with the default applied (optional ones)
}

// emit renders kernels.metal from the templates in fsys: the prelude (the
// baked and function constants, the argument structs, the params header),
// then the storage formats' tables and decoders, then each family's helpers
// and kernels.
func (l *Library) emit(fsys fs.FS) ([]byte, error) {
	t, err := template.New("msl").Option("missingkey=error").ParseFS(fsys, "*.metal.tmpl", "formats/*.metal.tmpl")
	if err != nil {
		return nil, fmt.Errorf("parsing MSL templates: %w", err)
	}
	var body bytes.Buffer
	if err := l.emitFormats(t, &body); err != nil {
		return nil, err
	}
	for _, f := range l.Families {
		if err := l.emitFamily(t, &body, f); err != nil {
			return nil, err
		}
	}
	prelude, err := l.prelude(t, body.Bytes())
	if err != nil {
		return nil, err
	}
	return tidy(append(prelude, body.Bytes()...)), nil
}

// functionConstants declares every function constant: the grid offsets'
// block, then each family's.
func (l *Library) functionConstants() []fcDecl {
	var out []fcDecl
	decl := func(family graph.Family, consts []FamilyConst, block int, what string) {
		for i, c := range consts {
			ident, derived := family.ConstIdents(c.Name)
			d := fcDecl{Type: c.Type, Ident: ident, Index: block + i, Optional: c.Optional, Default: c.Default}
			if c.Optional {
				d.Name = derived
			}
			if i == 0 {
				d.Comment = fmt.Sprintf("%s: %d–%d", what, block, block+len(consts)-1)
			}
			out = append(out, d)
		}
	}
	decl("", GridOffsetConsts, GridOffsetBlock, "grid offsets of a chunked dispatch (graph.ConstGridOffset*)")
	for _, f := range l.Families {
		decl(f.Name, f.Consts, f.Block, string(f.Name))
	}
	return out
}

// isWordByte is regexp's \w: an ASCII letter or digit, or an underscore.
func isWordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// mslWords are the identifiers of MSL source: its maximal runs of word
// bytes, what regexp `\b\w+\b` finds, without the regexp (a scan of every
// kernel's source per library).
func mslWords(b []byte) map[string]bool {
	words := map[string]bool{}
	for i := 0; i < len(b); {
		if !isWordByte(b[i]) {
			i++
			continue
		}
		j := i + 1
		for j < len(b) && isWordByte(b[j]) {
			j++
		}
		words[string(b[i:j])] = true
		i = j
	}
	return words
}

// hasWord is whether b holds w as a whole word: what regexp `\bw\b`
// matches, without compiling one per kernel and constant.
func hasWord(b []byte, w string) bool {
	if w == "" || strings.IndexFunc(w, func(r rune) bool { return r > 0x7f || !isWordByte(byte(r)) }) >= 0 {
		return regexp.MustCompile(`\b` + w + `\b`).Match(b)
	}
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(w))
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(w)
		if (start == 0 || !isWordByte(b[start-1])) && (end == len(b) || !isWordByte(b[end])) {
			return true
		}
		i = start + 1
	}
}

// prelude renders the prelude for body (the rest of kernels.metal): it
// declares only the baked constants and params-header words body uses, since
// MSL warns of unused ones.
func (l *Library) prelude(t *template.Template, body []byte) ([]byte, error) {
	pd := preludeData{Library: l, FCs: l.functionConstants()}
	for _, f := range l.Families {
		if l.argsUsed(f) {
			s, err := f.Args.MSL()
			if err != nil {
				return nil, err
			}
			pd.Structs = append(pd.Structs, s)
		}
	}
	used := mslWords(body)
	for _, b := range l.Baked {
		if used[b.Name] || b.Name == "simd_width" {
			pd.Baked = append(pd.Baked, b)
		}
	}
	for _, p := range paramsHeader {
		if used[p.Name] || p.Name == "params_rows" { // live_rows, in the prelude
			pd.Params = append(pd.Params, p)
		}
	}
	var out bytes.Buffer
	if err := t.ExecuteTemplate(&out, "prelude", pd); err != nil {
		return nil, fmt.Errorf("MSL prelude: %w", err)
	}
	return out.Bytes(), nil
}

// emitFormats writes the storage formats' lookup tables (each once) and
// decoders.
func (l *Library) emitFormats(t *template.Template, out *bytes.Buffer) error {
	need := map[string]bool{}
	for _, name := range l.Formats {
		names, err := formatTables(t, name)
		if err != nil {
			return fmt.Errorf("MSL decoder %s: %w", name, err)
		}
		for _, n := range names {
			need[n] = true
		}
	}
	if len(need) > 0 {
		fmt.Fprintf(out, "\n// ---- Lookup tables of the storage formats (generated from models/quant's ggml_tables.json) ----\n")
		for _, name := range sortedKeys(need) {
			lookupTables[name].emit(out, name)
		}
	}
	for _, name := range l.Formats {
		f, _ := quant.Lookup(name)
		fmt.Fprintf(out, "\n// ---- Storage format %s: %d elements in %d-byte blocks ----\n", name, f.BlockElems, f.BlockBytes)
		fmt.Fprintf(out, "constexpr constant uint %s_block_elems = %d;\nconstexpr constant uint %s_block_bytes = %d;\n", name, f.BlockElems, name, f.BlockBytes)
		fmt.Fprintf(out, "constexpr constant uint %s_chunk = ", name)
		if err := t.ExecuteTemplate(out, name+".chunk", nil); err != nil {
			return fmt.Errorf("MSL decoder %s: %w", name, err)
		}
		fmt.Fprintf(out, "; // elements per decode call\n")
		fmt.Fprintf(out, "// Bytes of a row of n elements, padded to whole blocks.\ninline ulong %s_row_bytes(uint n) { return ulong((n + %s_block_elems - 1) / %s_block_elems) * %s_block_bytes; }\n", name, name, name, name)
		if err := t.ExecuteTemplate(out, name+".decode", nil); err != nil {
			return fmt.Errorf("MSL decoder %s: %w", name, err)
		}
	}
	return nil
}

// readsFC finds a function constant read.
var readsFC = regexp.MustCompile(`\bfc_\w+`)

// emitFamily writes family f's helpers and its kernels.
func (l *Library) emitFamily(t *template.Template, out *bytes.Buffer, f *Family) error {
	fmt.Fprintf(out, "\n// ==== %s ====\n", f.Name)
	if h := t.Lookup(string(f.Name) + ".helpers"); h != nil {
		var hb bytes.Buffer
		if err := h.Execute(&hb, l); err != nil {
			return fmt.Errorf("MSL template %s.helpers: %w", f.Name, err)
		}
		// Helpers are shared by the family's kernels: constants reach
		// them as arguments, so each kernel's reads stay visible.
		if readsFC.Match(hb.Bytes()) {
			return fmt.Errorf("MSL template %s.helpers reads a function constant", f.Name)
		}
		out.Write(hb.Bytes())
	}
	body := t.Lookup(string(f.Name))
	if body == nil {
		return fmt.Errorf("no MSL template for kernel family %s (templates/msl/%s.metal.tmpl)", f.Name, f.Name)
	}
	for _, k := range l.Kernels {
		if k.Family == f {
			if err := l.emitKernel(body, out, k); err != nil {
				return err
			}
		}
	}
	return nil
}

// emitKernel renders kernel k from its family's template body, records the
// function constants its code reads (k.Consts), and refuses code that
// bypasses the grid offset or spells a params-header index.
func (l *Library) emitKernel(body *template.Template, out *bytes.Buffer, k *Kernel) error {
	f := k.Family
	var b bytes.Buffer
	kd := kernelData{Kernel: k, Lib: l}
	if err := body.Execute(&b, kd); err != nil {
		return fmt.Errorf("MSL template %s for kernel %s: %w", f.Name, k.Name, err)
	}
	k.Consts = nil
	for i := range GridOffsetConsts { // chunk_origin reads them
		k.Consts = append(k.Consts, GridOffsetBlock+i)
	}
	// What the code reads, not just what the template asked for.
	for i, c := range f.Consts {
		ident, _ := kd.FC(c.Name)
		if hasWord(b.Bytes(), ident) {
			k.Consts = append(k.Consts, f.Block+i)
		}
	}
	if strings.Contains(b.String(), "tgpig") {
		return fmt.Errorf("MSL template %s reads tgpig: use tg, which adds the grid offset of a chunked dispatch", f.Name)
	}
	if hardIndex.Match(b.Bytes()) {
		return fmt.Errorf("MSL template %s reads the params header at a literal index: use params_rows, params_pos or params_tokens (graph.Param*Word)", f.Name)
	}
	out.WriteString("\n")
	out.WriteString(l.signature(k))
	out.WriteString("{\n    const uint3 tg = chunk_origin(tgpig);\n")
	out.WriteString(strings.TrimLeft(b.String(), "\n"))
	out.WriteString("}\n")
	return nil
}

// tidy drops trailing blanks and runs of blank lines, so templates may be
// laid out for reading.
func tidy(src []byte) []byte {
	var out bytes.Buffer
	blank := 0
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimRight(line, " \t")
		if line == "" {
			blank++
			if blank > 1 {
				continue
			}
		} else {
			blank = 0
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return append(bytes.TrimRight(out.Bytes(), "\n"), '\n')
}

// threadAttrs are the built-in inputs every kernel takes.
var threadAttrs = []struct{ typ, name, attr string }{
	{"uint3", "tgpig", "threadgroup_position_in_grid"},
	{"uint", "tid", "thread_index_in_threadgroup"},
	{"uint", "ntg", "threads_per_threadgroup"},
	{"uint", "lane", "thread_index_in_simdgroup"},
	{"uint", "sg", "simdgroup_index_in_threadgroup"},
	{"uint", "nsg", "simdgroups_per_threadgroup"},
}

// signature is the kernel's MSL declaration, from its metadata.
func (l *Library) signature(k *Kernel) string {
	var params []string
	for _, b := range k.Buffers {
		cnst := "const "
		if b.Write || b.Space == "constant" { // constant memory is read-only already
			cnst = ""
		}
		params = append(params, fmt.Sprintf("%s %s%s *%s [[buffer(%d)]]", b.Space, cnst, b.Type, b.Name, b.Slot))
	}
	if k.ArgsSlot >= 0 {
		params = append(params, fmt.Sprintf("constant %s &args [[buffer(%d)]]", k.Family.Args.Name, k.ArgsSlot))
	}
	for _, a := range threadAttrs {
		params = append(params, fmt.Sprintf("%s %s [[%s]]", a.typ, a.name, a.attr))
	}
	return fmt.Sprintf("kernel void %s(\n    %s)\n", k.Name, strings.Join(params, ",\n    "))
}
