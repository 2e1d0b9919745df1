package gen

import (
	"fmt"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

// Generate builds the artifact of model config c: the window graph of
// every shape c.Windows asks for (decode windows, and each prefill shape
// twice: last-row logits and every row's logits), the MTP head's graphs,
// kernels.metal with every kernel they dispatch, and the metadata a backend
// binds them with, keyed by artifact.KeyOf(c). It is the one entry point
// stratagen, the generated packages and the tests build artifacts through.
func Generate(c *models.Config) (*artifact.Artifact, error) {
	graphs, err := artifactGraphs(c)
	if err != nil {
		return nil, err
	}
	a, err := Kernels(c, graphs)
	if err != nil {
		return nil, err
	}
	files := a.Files.(artifact.MapFS)
	for _, g := range graphs {
		all := g.Kind == graph.KindTrunk && g.Rows > c.Windows.MaxDecodeRows && g.LogitRows == g.Rows
		ref := artifact.GraphRef{Kind: g.Kind, Rows: g.Rows, AllLogits: all, File: artifact.GraphFile(g.Kind, g.Rows, all)}
		if files[ref.File], err = artifact.EncodeGraph(g); err != nil {
			return nil, fmt.Errorf("model %s: %w", c.Name, err)
		}
		a.Graphs = append(a.Graphs, ref)
	}
	return a, nil
}

// Kernels is the artifact of model c without graphs of its own: kernels.metal
// with every kernel graphs dispatch and the metadata a backend binds them
// with, for tests that run graphs they build themselves.
func Kernels(c *models.Config, graphs []*graph.Graph) (*artifact.Artifact, error) {
	key, err := artifact.KeyOf(c)
	if err != nil {
		return nil, err
	}
	formats, err := artifact.FormatsOf(c)
	if err != nil {
		return nil, err
	}
	lib, err := BuildLibrary(c, graphs)
	if err != nil {
		return nil, err
	}
	src, err := lib.MSL()
	if err != nil {
		return nil, err
	}
	cc := *c
	a := &artifact.Artifact{
		Schema: artifact.Schema, Name: c.Name, Key: key, Config: &cc, Formats: formats,
		Params: artifact.CurrentParams(), Buffers: bufferNames(graphs), Files: artifact.MapFS{artifact.KernelsFile: src},
	}
	if err := lib.describe(a); err != nil {
		return nil, fmt.Errorf("model %s: %w", c.Name, err)
	}
	return a, nil
}

// artifactGraphs builds the graphs of an artifact, in gen.Windows' order
// with each prefill shape's all-logits variant after its plain graph.
func artifactGraphs(c *models.Config) ([]*graph.Graph, error) {
	var graphs []*graph.Graph
	add := func(rows int, opt Options) error {
		g, err := Window(c, rows, opt)
		graphs = append(graphs, g)
		return err
	}
	for _, t := range c.Windows.Shapes() {
		prefill := t > c.Windows.MaxDecodeRows
		if err := add(t, Options{LastRowLogits: prefill}); err != nil {
			return nil, err
		}
		if prefill {
			if err := add(t, Options{}); err != nil {
				return nil, err
			}
		}
		if c.Architecture.MTP.NumLayers > 0 {
			if err := add(t, Options{MTP: true}); err != nil {
				return nil, err
			}
		}
	}
	return graphs, nil
}

// bufferNames are the graphs' buffers in the order the graphs list them
// (trunk first, then the MTP head's own), so ids are stable.
func bufferNames(graphs []*graph.Graph) []string {
	var out []string
	seen := map[string]bool{}
	for _, g := range graphs {
		for _, b := range g.Buffers {
			if !seen[b.Name] {
				seen[b.Name] = true
				out = append(out, b.Name)
			}
		}
	}
	return out
}

// describe fills in a the library's function constants, kernels,
// pipelines, argument-struct layouts and missing kernels.
func (l *Library) describe(a *artifact.Artifact) error {
	fc := func(index int, family graph.Family, c FamilyConst) artifact.FunctionConstant {
		t := artifact.UInt
		if c.Type == ConstBool {
			t = artifact.Bool
		}
		return artifact.FunctionConstant{Index: index, Family: family, Name: c.Name, Type: t, Optional: c.Optional, Default: c.Default}
	}
	for i, c := range GridOffsetConsts {
		a.Constants = append(a.Constants, fc(GridOffsetBlock+i, "", c))
	}
	sizes := map[graph.Family]int{}
	for _, f := range l.Families {
		for i, c := range f.Consts {
			a.Constants = append(a.Constants, fc(f.Block+i, f.Name, c))
		}
		if !l.argsUsed(f) {
			continue
		}
		s, err := f.Args.Layout()
		if err != nil {
			return err
		}
		as := artifact.ArgStruct{Family: f.Name, Name: f.Args.Name, Size: s.Size, Align: s.Align, Optional: f.ArgsOptional}
		for _, fl := range s.Fields {
			as.Fields = append(as.Fields, artifact.ArgField{Name: fl.Name, Type: string(fl.Type), Offset: fl.Offset})
		}
		a.Args = append(a.Args, as)
		sizes[f.Name] = s.Size
	}
	for _, k := range l.Kernels {
		ak := artifact.Kernel{Name: k.Name, Family: k.Family.Name, Format: k.Format, ArgsSlot: k.ArgsSlot, Constants: k.Consts, Buffers: append([]artifact.Buffer{}, k.Buffers...)}
		if k.ArgsSlot >= 0 {
			ak.ArgsSize = sizes[k.Family.Name]
		}
		if ak.Constants == nil {
			ak.Constants = []int{}
		}
		a.Kernels = append(a.Kernels, ak)
	}
	for _, p := range l.Pipelines {
		ap := artifact.Pipeline{Kernel: p.Kernel, Values: []artifact.ConstValue{}}
		for _, c := range p.Consts {
			ap.Values = append(ap.Values, artifact.ConstValue{Index: c.Index, Value: c.Value})
		}
		a.Pipelines = append(a.Pipelines, ap)
	}
	for _, mk := range l.Missing {
		a.Missing = append(a.Missing, mk.Kernel+": "+mk.Reason)
	}
	return nil
}
