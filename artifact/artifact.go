// Package artifact is the contract between the generator and the runtime:
// everything stratagen makes for one model config (kernels.metal, its
// function constants, kernels, pipelines and argument-struct layouts, the
// window graphs per shape, the buffer names, the params header and the
// storage format of every tensor) and the content key that says which
// configs it serves. The generator builds an Artifact (gen.Generate) and
// writes it (Write); the runtime loads one (Load), compiled in by importing
// a generated/<model> package (Register) or from a folder, and never
// imports the generator.
package artifact

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

// KernelsFile is the MSL source of a model in its Files.
const KernelsFile = "kernels.metal"

// Function-constant value types (MTLDataTypeUInt, MTLDataTypeBool).
const (
	UInt = "uint"
	Bool = "bool"
)

// FunctionConstant is a function constant kernels.metal declares.
type FunctionConstant struct {
	Index  int             `json:"index"`
	Family graph.Family    `json:"family,omitempty"` // "" for the grid offsets every family shares
	Name   graph.ConstName `json:"name"`
	Type   string          `json:"type"` // UInt or Bool
	// Optional constants may be left unset; the kernel uses Default.
	Optional bool  `json:"optional,omitempty"`
	Default  int64 `json:"default,omitempty"`
}

// ConstValue is one function-constant value of a pipeline.
type ConstValue struct {
	Index int   `json:"index"`
	Value int64 `json:"value"`
}

// Pipeline is a kernel specialized with function-constant values: what a
// backend builds once at load (MTLFunctionConstantValues, then a compute
// pipeline) and keys by kernel name and values.
type Pipeline struct {
	Kernel string       `json:"kernel"`
	Values []ConstValue `json:"values"` // ascending index
}

// Buffer is a buffer argument of a kernel.
type Buffer struct {
	Slot  int    `json:"slot"`
	Name  string `json:"name"`
	Type  string `json:"type"`  // MSL element type
	Space string `json:"space"` // "device" or "constant"
	Write bool   `json:"write,omitempty"`
}

// Kernel is one kernel function of kernels.metal.
type Kernel struct {
	Name    string       `json:"name"`
	Family  graph.Family `json:"family"`
	Format  string       `json:"format,omitempty"` // storage format of its weights, "" if none
	Buffers []Buffer     `json:"buffers"`
	// ArgsSlot is where the argument struct is bound (after the last buffer),
	// -1 without one; ArgsSize is its size in bytes.
	ArgsSlot int `json:"args_slot"`
	ArgsSize int `json:"args_size,omitempty"`
	// Constants are the indices of the function constants the kernel's code
	// reads, ascending: the grid offsets (optional) and those of its family
	// it uses, which is what Metal's reflection of the function
	// (functionConstantsDictionary) declares. A dispatch may carry more
	// (the storage format code, which the kernel name already fixes; the
	// sparse-attention shape a dense kernel ignores): Metal ignores a value
	// at an index the function does not declare, so a backend that checks
	// the values it sets against the reflection sets only these.
	Constants []int `json:"constants"`
}

// GraphRef names one window graph of the artifact.
type GraphRef struct {
	Kind string `json:"kind"` // graph.KindTrunk or graph.KindMTP
	Rows int    `json:"rows"`
	// AllLogits marks the variant of a prefill shape that computes every
	// row's logits (--dump-logits, perplexity); the plain prefill graph
	// computes the last row's only. Decode shapes always compute all rows.
	AllLogits bool   `json:"all_logits,omitempty"`
	File      string `json:"file"`
}

// ParamsHeader is where the window graphs expect the params header's fields,
// in 32-bit words (graph.ParamRows, graph.ParamPos, graph.ParamTokens).
type ParamsHeader map[string]int

// CurrentParams is the header this runtime writes.
func CurrentParams() ParamsHeader {
	return ParamsHeader{graph.ParamRows: graph.ParamRowsWord, graph.ParamPos: graph.ParamPosWord, graph.ParamTokens: graph.ParamTokensWord}
}

// Artifact is everything generated for one model config.
type Artifact struct {
	// Schema is the manifest's format version (Schema).
	Schema int `json:"schema"`
	// Name is the model it was generated for; Key the content key of its
	// config (KeyOf), which is what a runtime matches a model by.
	Name   string         `json:"name"`
	Key    string         `json:"key"`
	Config *models.Config `json:"config"`
	// Formats is the storage format of every tensor, by role name.
	Formats map[string]string `json:"formats"`
	Params  ParamsHeader      `json:"params"`
	// Buffers names the graphs' buffers; a buffer's id is its index.
	Buffers   []string           `json:"buffers"`
	Constants []FunctionConstant `json:"constants"`
	Kernels   []Kernel           `json:"kernels"`
	Pipelines []Pipeline         `json:"pipelines"`
	// Args are the argument structs the kernels take, one per family.
	Args   []ArgStruct `json:"args"`
	Graphs []GraphRef  `json:"graphs"`
	// Missing lists kernels the graphs dispatch that kernels.metal lacks
	// ("kernel: reason"); the GPU backends refuse such a model.
	Missing []string `json:"missing,omitempty"`
	// Files holds KernelsFile and every graph's File.
	Files fs.FS `json:"-"`
	// pipelineKeys are the Pipelines' keys, set by Load.
	pipelineKeys map[string]bool `json:"-"`
}

// Source returns kernels.metal.
func (a *Artifact) Source() ([]byte, error) {
	b, err := fs.ReadFile(a.Files, KernelsFile)
	if err != nil {
		return nil, fmt.Errorf("artifact of %s: %w", a.Name, err)
	}
	return b, nil
}

// GraphFile names the file of the window graph of kind (graph.KindTrunk or
// graph.KindMTP) and rows rows: window-T<rows>.json.gz, mtp-T<rows>.json.gz,
// and window-T<rows>-all.json.gz for a prefill shape's all-logits variant.
func GraphFile(kind string, rows int, allLogits bool) string {
	prefix := "window"
	if kind == graph.KindMTP {
		prefix = "mtp"
	}
	if allLogits {
		return fmt.Sprintf("%s-T%d-all.json.gz", prefix, rows)
	}
	return fmt.Sprintf("%s-T%d.json.gz", prefix, rows)
}

// ReadGraph decodes a window graph file: gzipped JSON when the name ends in
// .gz, plain JSON otherwise.
func ReadGraph(name string, data []byte) (*graph.Graph, error) {
	if strings.HasSuffix(name, ".gz") {
		r, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if data, err = io.ReadAll(r); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	g, err := graph.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return g, nil
}

// Shapes lists the window shapes (rows) the artifact has graphs for, of
// kind graph.KindTrunk or graph.KindMTP, ascending.
func (a *Artifact) Shapes(kind string) []int {
	var out []int
	for _, g := range a.Graphs {
		if g.Kind == kind && !g.AllLogits && !slices.Contains(out, g.Rows) {
			out = append(out, g.Rows)
		}
	}
	sort.Ints(out)
	return out
}

// Graph decodes the window graph of kind for windows of up to rows rows
// (the plain variant).
func (a *Artifact) Graph(kind string, rows int) (*graph.Graph, error) {
	return a.GraphVariant(kind, rows, false)
}

// GraphVariant decodes the window graph of kind and rows and validates it
// against the manifest (CheckGraph); allLogits asks for the variant
// computing every row's logits, which a decode shape's plain graph already
// is.
func (a *Artifact) GraphVariant(kind string, rows int, allLogits bool) (*graph.Graph, error) {
	ref, ok := a.graphRef(kind, rows, allLogits)
	if !ok && allLogits {
		if ref, ok = a.graphRef(kind, rows, false); ok && kind == graph.KindTrunk && rows > a.Config.Windows.MaxDecodeRows {
			ok = false // a prefill graph without its all-logits variant
		}
	}
	if !ok {
		return nil, fmt.Errorf("artifact of %s has no %s graph of %d rows (all logits %v; shapes %v)", a.Name, kind, rows, allLogits, a.Shapes(kind))
	}
	b, err := fs.ReadFile(a.Files, ref.File)
	if err != nil {
		return nil, fmt.Errorf("artifact of %s: %w", a.Name, err)
	}
	g, err := ReadGraph(ref.File, b)
	if err != nil {
		return nil, fmt.Errorf("artifact of %s: %w", a.Name, err)
	}
	if err := a.CheckGraph(g, ref); err != nil {
		return nil, err
	}
	return g, nil
}

func (a *Artifact) graphRef(kind string, rows int, allLogits bool) (GraphRef, bool) {
	for _, g := range a.Graphs {
		if g.Kind == kind && g.Rows == rows && g.AllLogits == allLogits {
			return g, true
		}
	}
	return GraphRef{}, false
}

// Kernel returns the kernel called name.
func (a *Artifact) Kernel(name string) (*Kernel, bool) {
	for i := range a.Kernels {
		if a.Kernels[i].Name == name {
			return &a.Kernels[i], true
		}
	}
	return nil, false
}

// Pipeline maps a dispatch to its pipeline: its kernel with the dispatch's
// constants at their function-constant indices (each one kernels.metal
// declares for the kernel's family).
func (a *Artifact) Pipeline(d *graph.Dispatch) (Pipeline, error) {
	if _, ok := a.Kernel(d.Kernel); !ok {
		return Pipeline{}, fmt.Errorf("artifact of %s: kernels.metal has no kernel %s", a.Name, d.Kernel)
	}
	p := Pipeline{Kernel: d.Kernel}
	for _, c := range d.Consts {
		idx := -1
		for _, fc := range a.Constants {
			if fc.Name == c.Name && (fc.Family == d.Family || fc.Family == "") {
				idx = fc.Index
				break
			}
		}
		if idx < 0 {
			return Pipeline{}, fmt.Errorf("artifact of %s: kernel %s has no function constant %s", a.Name, d.Kernel, c.Name)
		}
		p.Values = append(p.Values, ConstValue{Index: idx, Value: c.Value})
	}
	sort.Slice(p.Values, func(i, j int) bool { return p.Values[i].Index < p.Values[j].Index })
	return p, nil
}

// Key is the pipeline's cache key.
func (p Pipeline) Key() string {
	b := make([]byte, 0, len(p.Kernel)+12*len(p.Values))
	b = append(b, p.Kernel...)
	for _, v := range p.Values { // " index=value", without fmt: a load keys every dispatch
		b = strconv.AppendInt(append(b, ' '), int64(v.Index), 10)
		b = strconv.AppendInt(append(b, '='), v.Value, 10)
	}
	return string(b)
}
