package gen

import (
	"bytes"
	"fmt"
	"io/fs"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/templates/msl"
)

// Library is the MSL of one model: every kernel its window graphs dispatch,
// specialized for the model, and what a runtime needs to build the
// pipelines (kernel name + function-constant tuple) and bind the buffers.
type Library struct {
	Model     string
	ModelType string
	// Baked are the tier-1 constants: model dimensions and tile sizes
	// compiled into the source.
	Baked []BakedConst
	// Formats are the storage formats whose decoders the library holds.
	Formats  []string
	Families []*Family // the families used, in block order
	Kernels  []*Kernel // sorted by name
	// Pipelines are the distinct (kernel, function constants) pairs the
	// graphs dispatch, sorted.
	Pipelines []Pipeline
	// Missing are kernels the graphs dispatch that the library cannot hold
	// yet (no MSL decoder for their storage format), with the reason. A
	// runtime refuses such a model on the GPU backends.
	Missing []MissingKernel

	templates fs.FS
}

// BakedConst is a tier-1 constant: `constexpr constant uint Name = Value;`.
type BakedConst struct {
	Name    string
	Value   int
	Comment string
}

// Kernel is one MSL kernel function.
type Kernel struct {
	Name    string
	Family  *Family
	Format  string            // storage format of its weight bindings, "" if none
	Buffers []artifact.Buffer // in slot order, as the artifact lists them
	// ArgsSlot is the slot of the argument struct (after the last buffer),
	// -1 when the family has none.
	ArgsSlot   int
	Dispatches int // how many dispatches of all the model's graphs use it
	// Consts are the indices of the function constants the kernel's code
	// reads (the grid offsets, and those of its family its template uses),
	// ascending: what Metal's reflection of the function declares. A
	// dispatch may carry more (the storage format code the kernel name
	// already fixes; the sparse shape a dense kernel ignores). Filled when
	// the kernel is emitted.
	Consts []int
}

// PipelineConst is one function-constant value of a pipeline.
type PipelineConst struct {
	Index int
	Name  graph.ConstName
	Type  string
	Value int64
}

// Pipeline is a kernel specialized with function-constant values.
type Pipeline struct {
	Kernel string
	Consts []PipelineConst // ascending index
}

// Key is the pipeline's cache key: kernel name and constants.
func (p Pipeline) Key() string {
	var b strings.Builder
	b.WriteString(p.Kernel)
	for _, c := range p.Consts {
		fmt.Fprintf(&b, " %s=%d", c.Name, c.Value)
	}
	return b.String()
}

// less orders pipelines by kernel, then by constant values, numerically.
func (p Pipeline) less(o Pipeline) bool {
	if p.Kernel != o.Kernel {
		return p.Kernel < o.Kernel
	}
	for i := 0; i < len(p.Consts) && i < len(o.Consts); i++ {
		a, b := p.Consts[i], o.Consts[i]
		if a.Index != b.Index {
			return a.Index < b.Index
		}
		if a.Value != b.Value {
			return a.Value < b.Value
		}
	}
	return len(p.Consts) < len(o.Consts)
}

// MissingKernel is a kernel the library does not hold.
type MissingKernel struct {
	Kernel string
	Reason string
}

// Kernel returns the kernel called name.
func (l *Library) Kernel(name string) (*Kernel, bool) {
	i, ok := slices.BinarySearchFunc(l.Kernels, name, func(k *Kernel, n string) int { return strings.Compare(k.Name, n) })
	if !ok {
		return nil, false
	}
	return l.Kernels[i], true
}

// reservedNames are the identifiers every kernel body uses besides its
// bindings; a binding may not take them.
var reservedNames = map[string]bool{"tgpig": true, "tg": true, "tid": true, "ntg": true, "lane": true, "sg": true, "nsg": true, "args": true}

// BuildLibrary collects every kernel that graphs (all window graphs of model
// c) dispatch, and checks each dispatch against the catalog: its family, its
// function constants and their values, its scalars against the argument
// struct, its binding slots (contiguous, params first, argument struct after
// the last), one binding layout per kernel, and the formats of the weights
// it binds.
func BuildLibrary(c *models.Config, graphs []*graph.Graph) (*Library, error) {
	return buildLibraryWith(c, graphs, msl.FS)
}

// buildLibraryWith builds the library against the templates in fsys.
func buildLibraryWith(c *models.Config, graphs []*graph.Graph, fsys fs.FS) (*Library, error) {
	lib := &Library{Model: c.Name, ModelType: c.Architecture.ModelType, templates: fsys}
	baked, err := bakedConsts(c)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", c.Name, err)
	}
	lib.Baked = baked
	chunks, err := formatChunks(lib.templates)
	if err != nil {
		return nil, err
	}
	kernels := map[string]*Kernel{}
	missing := map[string]string{}
	pipelines := map[string]Pipeline{}
	for _, g := range graphs {
		tensors := map[graph.Range]graph.Tensor{}
		for _, t := range g.Tensors {
			tensors[graph.Range{Buffer: t.Buffer, Offset: t.Offset}] = t
		}
		gates := graph.ExpertGates(g.Tensors)
		for i := range g.Dispatches {
			d := &g.Dispatches[i]
			where := fmt.Sprintf("graph %s/%s T=%d dispatch %d (%s, layer %d)", g.Model, g.Kind, g.Rows, i, d.Kernel, d.Layer)
			f, err := FamilyByName(d.Family)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			p, err := pipelineOf(f, d)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			k, err := kernelOf(f, d, g, i)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if err := checkWeightFormats(k, d, g, tensors); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if k.Format != "" {
				// The first reason a kernel cannot be held is the one reported.
				var why string
				if _, ok := chunks[k.Format]; !ok {
					why = fmt.Sprintf("no MSL decoder for format %s (templates/msl/formats/%s.metal.tmpl)", k.Format, k.Format)
				} else if err := checkExpertParts(k, d, gates, tensors); err != nil {
					why = err.Error()
				} else if err := checkChunks(f, d, k.Format, chunks[k.Format]); err != nil {
					why = err.Error()
				}
				if why != "" {
					if _, ok := missing[k.Name]; !ok {
						missing[k.Name] = why
					}
					continue
				}
			}
			if err := checkFits(f, d, baked); err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if prev, ok := kernels[k.Name]; ok {
				if err := prev.merge(k); err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
			} else {
				kernels[k.Name] = k
			}
			kernels[k.Name].Dispatches++
			pipelines[p.Key()] = p
		}
	}
	for name, k := range kernels {
		if _, gone := missing[name]; gone {
			delete(kernels, name)
			continue
		}
		lib.Kernels = append(lib.Kernels, k)
	}
	sort.Slice(lib.Kernels, func(i, j int) bool { return lib.Kernels[i].Name < lib.Kernels[j].Name })
	for name, why := range missing {
		lib.Missing = append(lib.Missing, MissingKernel{Kernel: name, Reason: why})
	}
	sort.Slice(lib.Missing, func(i, j int) bool { return lib.Missing[i].Kernel < lib.Missing[j].Kernel })
	families, formats := map[graph.Family]bool{}, map[string]bool{}
	for _, k := range lib.Kernels {
		families[k.Family.Name] = true
		if k.Format != "" {
			formats[k.Format] = true
		}
	}
	for _, f := range catalog {
		if families[f.Name] {
			lib.Families = append(lib.Families, f)
		}
	}
	for name := range formats {
		lib.Formats = append(lib.Formats, name)
	}
	sort.Strings(lib.Formats)
	// Rendering records which function constants each kernel reads.
	if _, err := lib.emit(fsys); err != nil {
		return nil, err
	}
	for _, p := range pipelines {
		if _, ok := lib.Kernel(p.Kernel); ok {
			lib.Pipelines = append(lib.Pipelines, p)
		}
	}
	sort.Slice(lib.Pipelines, func(i, j int) bool { return lib.Pipelines[i].less(lib.Pipelines[j]) })
	return lib, nil
}

// PipelineOf is the pipeline of a dispatch of the library: its kernel with
// the dispatch's function constants.
func (l *Library) PipelineOf(d *graph.Dispatch) (Pipeline, error) {
	k, ok := l.Kernel(d.Kernel)
	if !ok {
		return Pipeline{}, fmt.Errorf("library %s has no kernel %s", l.Model, d.Kernel)
	}
	return pipelineOf(k.Family, d)
}

// pipelineOf checks a dispatch's constants against its family and returns
// its pipeline.
func pipelineOf(f *Family, d *graph.Dispatch) (Pipeline, error) {
	p := Pipeline{Kernel: d.Kernel}
	seen := map[graph.ConstName]bool{}
	for _, c := range d.Consts {
		if seen[c.Name] {
			return Pipeline{}, fmt.Errorf("function constant %s given twice", c.Name)
		}
		seen[c.Name] = true
		decl, idx, ok := lookupConst(f, c.Name)
		if !ok {
			return Pipeline{}, fmt.Errorf("constant %s is not a function constant of family %s (gen/catalog.go)", c.Name, f.Name)
		}
		switch decl.Type {
		case ConstBool:
			if c.Value != 0 && c.Value != 1 {
				return Pipeline{}, fmt.Errorf("bool function constant %s = %d", c.Name, c.Value)
			}
		case ConstUInt:
			if c.Value < 0 || c.Value > 1<<32-1 {
				return Pipeline{}, fmt.Errorf("uint function constant %s = %d does not fit 32 bits", c.Name, c.Value)
			}
		}
		p.Consts = append(p.Consts, PipelineConst{Index: idx, Name: c.Name, Type: decl.Type, Value: c.Value})
	}
	for _, decl := range f.Consts {
		if !decl.Optional && !seen[decl.Name] {
			return Pipeline{}, fmt.Errorf("function constant %s of family %s is missing", decl.Name, f.Name)
		}
	}
	sort.Slice(p.Consts, func(i, j int) bool { return p.Consts[i].Index < p.Consts[j].Index })
	if args := f.argsOf(len(d.Scalars)); args != nil {
		if err := args.checkScalars(d.Scalars); err != nil {
			return Pipeline{}, err
		}
	} else if len(d.Scalars) > 0 {
		return Pipeline{}, fmt.Errorf("family %s has no argument struct, the dispatch has scalars %v", f.Name, scalarNames(d.Scalars))
	}
	return p, nil
}

// lookupConst finds a function constant of f or a shared grid offset.
func lookupConst(f *Family, name graph.ConstName) (FamilyConst, int, bool) {
	if idx, ok := f.ConstIndex(name); ok {
		decl, _ := f.Const(name)
		return decl, idx, true
	}
	for i, c := range GridOffsetConsts {
		if c.Name == name {
			return c, GridOffsetBlock + i, true
		}
	}
	return FamilyConst{}, 0, false
}

// kernelOf derives the kernel (name, format, buffer layout) of a dispatch.
func kernelOf(f *Family, d *graph.Dispatch, g *graph.Graph, index int) (*Kernel, error) {
	k := &Kernel{Name: d.Kernel, Family: f, ArgsSlot: -1}
	if len(f.Formatted) > 0 {
		code, ok := d.Const(graph.ConstWFmt)
		if !ok {
			return nil, fmt.Errorf("family %s binds weights but the dispatch has no wfmt", f.Name)
		}
		qf, err := quant.ByCode(int(code))
		if err != nil {
			return nil, err
		}
		k.Format = qf.Name
	}
	want := string(f.Name)
	if k.Format != "" {
		want = f.Name.Kernel(k.Format)
	}
	if d.Kernel != want {
		return nil, fmt.Errorf("kernel name %q, the catalog names it %q (family, then storage format)", d.Kernel, want)
	}
	for i, a := range d.Args {
		if a.Slot != i {
			return nil, fmt.Errorf("binding %s at slot %d, expected %d: slots follow the binding order", a.Name, a.Slot, i)
		}
		if !artifact.IsIdent(a.Name) || reservedNames[a.Name] || (a.Name == graph.ParamsBuffer) != (i == 0) {
			return nil, fmt.Errorf("binding %q at slot %d: bindings are identifiers, params is slot 0, and %v are taken", a.Name, i, sortedKeys(reservedNames))
		}
		kb := artifact.Buffer{Slot: i, Name: a.Name, Type: f.elemType(a.Name), Space: "device", Write: a.Access != graph.Read}
		if a.Name == graph.ParamsBuffer {
			if a.Access != graph.Read || a.Buffer != BufParams {
				return nil, fmt.Errorf("params binding must read the params buffer")
			}
			kb.Space = "constant"
		}
		k.Buffers = append(k.Buffers, kb)
	}
	if len(d.Scalars) > 0 {
		k.ArgsSlot = len(d.Args)
		if g.ICB != nil && index < len(g.ICB.Commands) {
			if a := g.ICB.Commands[index].Args; a == nil || a.Slot != k.ArgsSlot {
				return nil, fmt.Errorf("the ICB plan puts the argument struct elsewhere than slot %d", k.ArgsSlot)
			}
		}
	}
	return k, nil
}

// merge folds another dispatch's view of the same kernel into k: one MSL
// function has one signature, so names and slots must agree; a buffer is
// writable if any dispatch writes it.
func (k *Kernel) merge(o *Kernel) error {
	if len(k.Buffers) != len(o.Buffers) || k.ArgsSlot != o.ArgsSlot || k.Format != o.Format {
		return fmt.Errorf("kernel %s is dispatched with two different binding layouts (%s and %s)", k.Name, k.layout(), o.layout())
	}
	for i := range k.Buffers {
		if k.Buffers[i].Name != o.Buffers[i].Name {
			return fmt.Errorf("kernel %s is dispatched with two different binding layouts (%s and %s)", k.Name, k.layout(), o.layout())
		}
		k.Buffers[i].Write = k.Buffers[i].Write || o.Buffers[i].Write
	}
	return nil
}

func (k *Kernel) layout() string {
	var names []string
	for _, b := range k.Buffers {
		names = append(names, b.Name)
	}
	return strings.Join(names, ",")
}

// checkWeightFormats verifies that float bindings of weight buffers bind f32
// tensors and formatted bindings bind tensors of the kernel's format.
func checkWeightFormats(k *Kernel, d *graph.Dispatch, g *graph.Graph, tensors map[graph.Range]graph.Tensor) error {
	for _, a := range d.Args {
		buf, _ := g.Buffer(a.Buffer)
		if buf.Kind != graph.KindWeights && buf.Kind != graph.KindExperts {
			continue
		}
		want := "f32"
		if k.Family.formatted(a.Name) {
			want = k.Format
		}
		// Every tensor inside the bound range (experts bind gate, up and down).
		found := false
		for _, t := range g.Tensors {
			if t.Buffer != a.Buffer || t.Offset < a.Offset || t.Offset >= a.End() {
				continue
			}
			found = true
			if t.Format != want {
				return fmt.Errorf("binding %s reads tensor %s stored as %s, kernel %s reads %s", a.Name, t.Name, t.Format, k.Name, want)
			}
		}
		if !found {
			if _, ok := tensors[graph.Range{Buffer: a.Buffer, Offset: a.Offset}]; !ok {
				return fmt.Errorf("binding %s at %s+%d starts at no tensor", a.Name, a.Buffer, a.Offset)
			}
		}
	}
	return nil
}

// expertParts are the parts of an expert block each expert family decodes,
// by the function constant that places them in the block.
var expertParts = map[graph.Family][]graph.ConstName{graph.FamilyMoEGateUp: {graph.ConstGateOff, graph.ConstUpOff}, graph.FamilyMoEDown: {graph.ConstDownOff}}

// checkExpertParts verifies that the expert parts a kernel decodes are
// stored in its format: moe_gate_up is named by gate and up's format,
// moe_down by down's, which a row policy may store differently
// (Qwen3.8-Flash-Next's 640-wide down rows fall back to iq4_nl under
// rows=fallback while gate and up stay iq2_xs). A kernel that would misread
// a part is left out.
func checkExpertParts(k *Kernel, d *graph.Dispatch, gates map[int]graph.Tensor, tensors map[graph.Range]graph.Tensor) error {
	gate, ok := gates[d.Layer]
	if !ok {
		return nil
	}
	for _, part := range expertParts[k.Family.Name] {
		off, _ := d.Const(part)
		t, ok := tensors[graph.Range{Buffer: gate.Buffer, Offset: gate.Offset + off}]
		if ok && t.Format != k.Format {
			return fmt.Errorf("%s decodes tensor %s as %s, but it is stored as %s", k.Name, t.Name, k.Format, t.Format)
		}
	}
	return nil
}

// checkChunks verifies that the rows a formatted kernel decodes are whole
// decoder chunks (the kernels have no tail path yet).
func checkChunks(f *Family, d *graph.Dispatch, format string, chunk int) error {
	var lens []graph.ConstName
	switch f.Name {
	case graph.FamilyEmbed:
		lens = []graph.ConstName{graph.ConstDim}
	case graph.FamilyMatmul:
		lens = []graph.ConstName{graph.ConstK}
	case graph.FamilyMoEGateUp:
		lens = []graph.ConstName{graph.ConstHidden}
	case graph.FamilyMoEDown:
		lens = []graph.ConstName{graph.ConstInter}
	}
	for _, name := range lens {
		v, _ := d.Const(name)
		if v%int64(chunk) != 0 {
			return fmt.Errorf("%s rows of %d elements are not whole %s decoder chunks of %d (a tail path is needed)", f.Name, v, format, chunk)
		}
	}
	return nil
}

// checkFits verifies that a dispatch's sizes fit the arrays the kernels size
// with baked constants.
func checkFits(f *Family, d *graph.Dispatch, baked []BakedConst) error {
	bv := func(name string) int64 {
		for _, b := range baked {
			if b.Name == name {
				return int64(b.Value)
			}
		}
		panic("gen: no baked constant " + name)
	}
	c := func(name graph.ConstName) int64 { v, _ := d.Const(name); return v }
	type limit struct {
		what       string
		have, most int64
	}
	var limits []limit
	switch f.Name {
	case graph.FamilyGDNConv:
		limits = append(limits, limit{"conv kernel", c(graph.ConstKernel), bv("gdn_conv_window")})
	case graph.FamilyGDNRule:
		limits = append(limits, limit{"key head dim", c(graph.ConstDK), simdWidth * bv("gdn_rule_rows_per_lane")})
	case graph.FamilyAttention:
		limits = append(limits, limit{"head dim", c(graph.ConstHeadDim), simdWidth * bv("attn_dims_per_lane")})
	case graph.FamilyRouter:
		limits = append(limits, limit{"experts", c(graph.ConstExperts), simdWidth * bv("router_experts_per_lane")})
	case graph.FamilyPLEConv:
		limits = append(limits, limit{"conv window", (c(graph.ConstKernel)-1)*c(graph.ConstDilation) + 1, bv("ple_conv_window")})
	case graph.FamilyIndexPool:
		limits = append(limits, limit{"head dim", c(graph.ConstHeadDim), bv("index_head_dim_max")})
	case graph.FamilyIndexSelect:
		limits = append(limits, limit{"query size", c(graph.ConstHeads) * c(graph.ConstHeadDim), bv("index_query_max")},
			limit{"top-k", c(graph.ConstTopK), 1<<32 - 2})
	}
	for _, l := range limits {
		if l.have > l.most || l.have < 0 {
			return fmt.Errorf("%s %d is more than the %d the kernel was generated for", l.what, l.have, l.most)
		}
	}
	return nil
}

// bakedConsts are the tier-1 constants of model c: tile sizes and the model
// dimensions that size per-thread and threadgroup arrays.
func bakedConsts(c *models.Config) ([]BakedConst, error) {
	a := &c.Architecture
	perLane := func(n int) int { return max(1, ceilDiv(n, simdWidth)) }
	selectCache := selectCacheMax
	indexQuery := max(1, a.Indexer.Heads*a.Indexer.HeadDim)
	if a.Indexer.CompressRatio > 0 {
		selectCache = min(selectCacheMax, max(1, ceilDiv(c.Runtime.ContextLength, a.Indexer.CompressRatio)))
	}
	// index_select's threadgroup memory: query, score cache, 2048-bin
	// histogram, scan partials and the broadcast pair.
	if tgBytes := 4 * (indexQuery + selectCache + 2048 + rowSimdgroups + 2); tgBytes > threadgroupMemoryLimit {
		return nil, fmt.Errorf("index_select needs %d bytes of threadgroup memory, more than %d: the indexer query (%d floats) is too large", tgBytes, threadgroupMemoryLimit, indexQuery)
	}
	if ceilDiv(a.MoE.NumExperts, simdWidth) > 32 {
		return nil, fmt.Errorf("router keeps its experts in registers with one taken-bit per entry: %d experts is more than 1024", a.MoE.NumExperts)
	}
	return []BakedConst{
		{"simd_width", simdWidth, "lanes of a simdgroup on Apple GPUs"},
		{"row_simdgroups", rowSimdgroups, "most simdgroups of a row kernel's threadgroup"},
		{"matmul_simdgroups", matmulSimdgroups, "matmul: simdgroups per threadgroup"},
		{"matmul_rows_per_simdgroup", matmulRowsPerSimdgroup, "matmul: output rows per simdgroup"},
		{"matmul_batch_rows", matmulBatchRows, "matmul: window rows per threadgroup, each weight read once for all"},
		{"expert_simdgroups", expertSimdgroups, "moe_gate_up, moe_down: one expert row per simdgroup"},
		{"gdn_rule_columns", ruleColumns, "gdn_rule: state columns per simdgroup"},
		{"gdn_rule_simdgroups", ruleSimdgroups, "gdn_rule: simdgroups per threadgroup"},
		{"attn_simdgroups", attnSimdgroups, "attention: simdgroups splitting the keys of one (row, head)"},
		{"select_threads", selectThreads, "index_select: threads per threadgroup"},
		{"hidden_size", a.HiddenSize, "model: hidden size"},
		{"vocab_size", a.VocabSize, "model: vocabulary"},
		{"gdn_rule_rows_per_lane", perLane(a.LinearAttention.KeyHeadDim), "gdn_rule: key rows of the state per lane (key head dim / 32)"},
		{"gdn_conv_window", max(1, a.LinearAttention.ConvKernel), "gdn_conv: taps of the causal conv"},
		{"attn_dims_per_lane", perLane(a.Attention.HeadDim), "attention: head dims per lane (head dim / 32)"},
		{"router_experts_per_lane", perLane(a.MoE.NumExperts), "router: logits per lane (experts / 32)"},
		{"ple_conv_window", max(1, (a.PLE.ConvKernel-1)*a.PLE.NgramSize+1), "ple_conv: taps of the dilated conv window"},
		{"index_head_dim_max", max(1, a.Indexer.HeadDim), "index_pool: pooled key size"},
		{"index_query_max", indexQuery, "index_select: indexer query floats per row (heads × head dim)"},
		{"select_cache", selectCache, "index_select: block scores kept in threadgroup memory"},
	}, nil
}

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
	"iq2s_grid": {"ulong", "IQ2_S: 1024 grid points of eight magnitudes (models/quant/ggml_iq_grids.json)", 4, func() []string {
		var out []string
		for _, v := range quant.IQ2SGrid() {
			out = append(out, fmt.Sprintf("0x%016xul", v))
		}
		return out
	}},
	"iq3s_grid": {"uint", "IQ3_S: 512 grid points of four magnitudes (models/quant/ggml_iq_grids.json)", 8, func() []string {
		var out []string
		for _, v := range quant.IQ3SGrid() {
			out = append(out, fmt.Sprintf("0x%08xu", v))
		}
		return out
	}},
	"iq1s_grid": {"ulong", "IQ1_S, IQ1_M: 2048 grid points of eight int8 values in {-1, 0, 1} (models/quant/ggml_iq_grids.json)", 4, func() []string {
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

// mslWord finds the identifiers of MSL source.
var mslWord = regexp.MustCompile(`\b\w+\b`)

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
	used := map[string]bool{}
	for _, w := range mslWord.FindAll(body, -1) {
		used[string(w)] = true
	}
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
		if regexp.MustCompile(`\b` + ident + `\b`).Match(b.Bytes()) {
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

var (
	kernelRE = regexp.MustCompile(`(?m)^kernel void (\w+)\(([^)]*(?:\)\]\][^)]*)*)\)\s*\{`)
	bufferRE = regexp.MustCompile(`\*?&?\s*(\w+)\s*\[\[buffer\((\d+)\)\]\]`)
	fcRE     = regexp.MustCompile(`(?m)^constant (\w+) (\w+) \[\[function_constant\((\d+)\)\]\];`)
)

// CheckSource checks emitted MSL against the library's metadata, since
// clang ignores Metal's attributes: every kernel is declared once, with
// exactly its buffers at their slots ([[buffer(n)]] distinct, the argument
// struct after the last binding, 31 slots at most), and every function
// constant is declared once, at its catalog index, with indices unique.
func (l *Library) CheckSource(src []byte) error {
	text := string(src)
	seen := map[string]bool{}
	for _, m := range kernelRE.FindAllStringSubmatch(text, -1) {
		name := m[1]
		k, ok := l.Kernel(name)
		if !ok || seen[name] {
			return fmt.Errorf("kernels.metal: kernel %s is not in the library metadata or declared twice", name)
		}
		seen[name] = true
		want := map[int]string{}
		for _, b := range k.Buffers {
			want[b.Slot] = b.Name
		}
		if k.ArgsSlot >= 0 {
			want[k.ArgsSlot] = "args"
		}
		got := map[int]string{}
		for _, b := range bufferRE.FindAllStringSubmatch(m[2], -1) {
			slot, _ := strconv.Atoi(b[2])
			if other, dup := got[slot]; dup {
				return fmt.Errorf("kernels.metal: kernel %s binds %s and %s to [[buffer(%d)]]", name, other, b[1], slot)
			}
			if slot >= graph.DefaultLimits.MaxBufferBindings {
				return fmt.Errorf("kernels.metal: kernel %s binds %s to [[buffer(%d)]], past the %d slots", name, b[1], slot, graph.DefaultLimits.MaxBufferBindings)
			}
			got[slot] = b[1]
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("kernels.metal: kernel %s binds %v, its metadata says %v", name, got, want)
		}
	}
	for _, k := range l.Kernels {
		if !seen[k.Name] {
			return fmt.Errorf("kernels.metal: kernel %s is missing", k.Name)
		}
	}
	wantFC := map[int]string{}
	for i, c := range GridOffsetConsts {
		wantFC[GridOffsetBlock+i], _ = graph.Family("").ConstIdents(c.Name)
	}
	for _, f := range l.Families {
		if f.Block%blockSize != 0 || len(f.Consts) >= blockSize {
			return fmt.Errorf("family %s: block %d must be a multiple of %d holding fewer than %d constants", f.Name, f.Block, blockSize, blockSize)
		}
		for i, c := range f.Consts {
			wantFC[f.Block+i], _ = f.Name.ConstIdents(c.Name)
		}
	}
	gotFC := map[int]string{}
	for _, m := range fcRE.FindAllStringSubmatch(text, -1) {
		idx, _ := strconv.Atoi(m[3])
		if other, dup := gotFC[idx]; dup {
			return fmt.Errorf("kernels.metal: function constants %s and %s share index %d", other, m[2], idx)
		}
		gotFC[idx] = m[2]
	}
	if fmt.Sprint(gotFC) != fmt.Sprint(wantFC) {
		return fmt.Errorf("kernels.metal declares function constants %v, the catalog says %v", gotFC, wantFC)
	}
	return nil
}

// Lines counts the lines of an emitted file.
func Lines(src []byte) int { return bytes.Count(src, []byte("\n")) }
