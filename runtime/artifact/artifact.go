// Package artifact is the registry of generated models. Each
// generated/<model> package registers at init its MSL source, its window
// graphs and the metadata of its kernels and pipelines, so a runtime loads a
// model by name (import the model's package, then Lookup) without importing
// the generator.
package artifact

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/strata-llm/strata/graph"
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
	Index  int
	Family graph.Family // "" for the grid offsets every family shares
	Name   graph.ConstName
	Type   string // UInt or Bool
	// Optional constants may be left unset; the kernel uses Default.
	Optional bool
	Default  int64
}

// ConstValue is one function-constant value of a pipeline.
type ConstValue struct {
	Index int
	Value int64
}

// Pipeline is a kernel specialized with function-constant values: what a
// backend builds once at load (MTLFunctionConstantValues, then a compute
// pipeline) and keys by kernel name and values.
type Pipeline struct {
	Kernel string
	Values []ConstValue // ascending index
}

// Buffer is a buffer argument of a kernel.
type Buffer struct {
	Slot  int
	Name  string
	Type  string // MSL element type
	Space string // "device" or "constant"
	Write bool
}

// Kernel is one kernel function of kernels.metal.
type Kernel struct {
	Name    string
	Family  graph.Family
	Format  string // storage format of its weights, "" if none
	Buffers []Buffer
	// ArgsSlot is where the argument struct is bound (after the last buffer),
	// -1 without one; ArgsSize is its size in bytes.
	ArgsSlot int
	ArgsSize int
	// Constants are the indices of the function constants the kernel's code
	// reads, ascending: the grid offsets (optional) and those of its family
	// it uses, which is what Metal's reflection of the function
	// (functionConstantsDictionary) declares. A dispatch may carry more
	// (the storage format code, which the kernel name already fixes; the
	// sparse-attention shape a dense kernel ignores): Metal ignores a value
	// at an index the function does not declare, so a backend that checks
	// the values it sets against the reflection sets only these.
	Constants []int
}

// Model is one generated model.
type Model struct {
	Name string
	// Files holds KernelsFile and the window graphs, gzipped JSON named
	// by GraphFile: window-T<rows>.json.gz (trunk) and mtp-T<rows>.json.gz
	// (MTP draft head). Plain .json graphs are read too.
	Files fs.FS
	// Buffers names the graphs' buffers; a buffer's id is its index.
	Buffers   []string
	Constants []FunctionConstant
	Kernels   []Kernel
	Pipelines []Pipeline
	// Missing lists kernels the graphs dispatch that kernels.metal lacks
	// ("kernel: reason"); the GPU backends refuse such a model.
	Missing []string
	// EncodeArgs turns a dispatch's scalars into the argument struct bytes
	// of its family, in MSL layout.
	EncodeArgs func(family graph.Family, scalars []graph.Scalar) ([]byte, error)
}

var (
	mu       sync.RWMutex
	registry = map[string]*Model{}
)

// Register adds a model; generated packages call it from init. A second
// model of the same name is a build error of the program, so it panics.
func Register(m *Model) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := registry[m.Name]; dup {
		panic("artifact: model " + m.Name + " registered twice")
	}
	registry[m.Name] = m
}

// Lookup returns the registered model called name.
func Lookup(name string) (*Model, error) {
	mu.RLock()
	defer mu.RUnlock()
	if m, ok := registry[name]; ok {
		return m, nil
	}
	var names []string
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("no generated model %q is linked in (registered: %v); import its package github.com/strata-llm/strata/generated/%s", name, names, name)
}

// Names lists the registered models, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	var out []string
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Source returns kernels.metal.
func (m *Model) Source() ([]byte, error) {
	b, err := fs.ReadFile(m.Files, KernelsFile)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	return b, nil
}

var graphFileRE = regexp.MustCompile(`^(window|mtp)-T(\d+)\.json(\.gz)?$`)

// GraphFile names the generated file of the window graph of kind
// (graph.KindTrunk or graph.KindMTP) and rows rows.
func GraphFile(kind string, rows int) string {
	prefix := "window"
	if kind == graph.KindMTP {
		prefix = "mtp"
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

// Shapes lists the window shapes (rows) the model has graphs for, of kind
// graph.KindTrunk or graph.KindMTP, ascending.
func (m *Model) Shapes(kind string) []int {
	entries, _ := fs.ReadDir(m.Files, ".")
	var out []int
	for _, e := range entries {
		p := graphFileRE.FindStringSubmatch(e.Name())
		if p == nil || (p[1] == "window") != (kind == graph.KindTrunk) {
			continue
		}
		n, _ := strconv.Atoi(p[2])
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// Graph decodes the window graph of kind (graph.KindTrunk or
// graph.KindMTP) for windows of up to rows rows.
func (m *Model) Graph(kind string, rows int) (*graph.Graph, error) {
	name := GraphFile(kind, rows)
	b, err := fs.ReadFile(m.Files, name)
	if errors.Is(err, fs.ErrNotExist) {
		plain := strings.TrimSuffix(name, ".gz")
		if pb, perr := fs.ReadFile(m.Files, plain); perr == nil {
			name, b, err = plain, pb, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("model %s has no %s graph of %d rows (shapes %v): %w", m.Name, kind, rows, m.Shapes(kind), err)
	}
	g, err := ReadGraph(name, b)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", m.Name, err)
	}
	return g, nil
}

// Kernel returns the kernel called name.
func (m *Model) Kernel(name string) (*Kernel, bool) {
	for i := range m.Kernels {
		if m.Kernels[i].Name == name {
			return &m.Kernels[i], true
		}
	}
	return nil, false
}

// Pipeline maps a dispatch to its pipeline: its kernel with the dispatch's
// constants at their function-constant indices (each one kernels.metal
// declares for the kernel's family).
func (m *Model) Pipeline(d *graph.Dispatch) (Pipeline, error) {
	if _, ok := m.Kernel(d.Kernel); !ok {
		return Pipeline{}, fmt.Errorf("model %s: kernels.metal has no kernel %s", m.Name, d.Kernel)
	}
	p := Pipeline{Kernel: d.Kernel}
	for _, c := range d.Consts {
		idx := -1
		for _, fc := range m.Constants {
			if fc.Name == c.Name && (fc.Family == d.Family || fc.Family == "") {
				idx = fc.Index
				break
			}
		}
		if idx < 0 {
			return Pipeline{}, fmt.Errorf("model %s: kernel %s has no function constant %s", m.Name, d.Kernel, c.Name)
		}
		p.Values = append(p.Values, ConstValue{Index: idx, Value: c.Value})
	}
	sort.Slice(p.Values, func(i, j int) bool { return p.Values[i].Index < p.Values[j].Index })
	return p, nil
}

// Key is the pipeline's cache key.
func (p Pipeline) Key() string {
	b := []byte(p.Kernel)
	for _, v := range p.Values {
		b = fmt.Appendf(b, " %d=%d", v.Index, v.Value)
	}
	return string(b)
}
