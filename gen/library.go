package gen

import (
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

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
		{"matmul_rows_per_simdgroup", matmulRowsPerSimdgroup, "matmul: output rows per simdgroup (per threadgroup when its simdgroups split the rows)"},
		{"matmul_split_max_n", matmulSplitMaxN, "matmul: most output rows a decode matmul splits each row over its simdgroups for"},
		{"matmul_split_min_k", matmulSplitMinK, "matmul: shortest weight rows a decode matmul splits over its simdgroups"},
		{"matmul_batch_rows", matmulBatchRows, "matmul: window rows per threadgroup, each weight read once for all; past it the matrix units"},
		{"matmul_mma_outputs", matmulMMAOutputs, "matmul, prefill: outputs per threadgroup (weight rows decoded into threadgroup memory)"},
		{"matmul_mma_rows", matmulMMARows, "matmul, prefill: (sub-)rows per threadgroup"},
		{"matmul_mma_depth", matmulMMADepth, "matmul, prefill: weight columns decoded per step"},
		{"matmul_mma_min_n", matmulMMAMinN, "matmul, prefill: fewest outputs that take the matrix units"},
		{"expert_simdgroups", expertSimdgroups, "moe_gate_up, moe_down: one expert row per simdgroup"},
		{"moe_mma_outputs", moeMMAOutputs, "moe_gate_up, prefill: outputs (gate and up rows each) of one expert per threadgroup"},
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
