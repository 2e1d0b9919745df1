package metal_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend/metal"
)

func TestTableResolver(t *testing.T) {
	resolve := metal.TableResolver(map[graph.Family][]metal.ConstantSlot{
		"matmul": {
			{Name: "rows", Index: 301, Type: metal.TypeUInt},
			{Name: "n", Index: 300, Type: metal.TypeUInt},
			{Name: "fold", Index: 302, Type: metal.TypeBool, Optional: true},
			{Name: graph.ConstGridOffsetX, Index: 0, Type: metal.TypeUInt, Optional: true},
		},
	})
	d := &graph.Dispatch{Kernel: "matmul_q8_0", Family: "matmul", Consts: []graph.Const{{Name: "rows", Value: 4}, {Name: "n", Value: 512}}}
	f, err := resolve(d)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.Key(), "matmul_q8_0 300:uint=512 301:uint=4"; got != want {
		t.Errorf("key %q, want %q (sorted by index)", got, want)
	}
	for _, c := range []struct {
		name string
		d    graph.Dispatch
		want string
	}{
		{"unknown family", graph.Dispatch{Kernel: "x", Family: "x"}, "no function-constant table"},
		{"constant with no slot", graph.Dispatch{Kernel: "m", Family: "matmul", Consts: []graph.Const{{Name: "rows", Value: 1}, {Name: "n", Value: 1}, {Name: "k", Value: 1}}}, "no function-constant slot"},
		{"required constant missing", graph.Dispatch{Kernel: "m", Family: "matmul", Consts: []graph.Const{{Name: "rows", Value: 1}}}, "required function constant n"},
		{"bool out of range", graph.Dispatch{Kernel: "m", Family: "matmul", Consts: []graph.Const{{Name: "rows", Value: 1}, {Name: "n", Value: 1}, {Name: "fold", Value: 2}}}, "does not fit"},
		{"uint out of range", graph.Dispatch{Kernel: "m", Family: "matmul", Consts: []graph.Const{{Name: "rows", Value: -1}, {Name: "n", Value: 1}}}, "does not fit"},
		{"constant twice", graph.Dispatch{Kernel: "m", Family: "matmul", Consts: []graph.Const{{Name: "rows", Value: 1}, {Name: "rows", Value: 1}, {Name: "n", Value: 1}}}, "set twice"},
	} {
		if _, err := resolve(&c.d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestDataTypeEncoding(t *testing.T) {
	for _, c := range []struct {
		t    metal.DataType
		v    int64
		want []byte
	}{
		{metal.TypeUInt, 0x01020304, []byte{4, 3, 2, 1}},
		{metal.TypeInt, -2, []byte{0xfe, 0xff, 0xff, 0xff}},
		{metal.TypeUShort, 0x0102, []byte{2, 1}},
		{metal.TypeBool, 1, []byte{1}},
	} {
		if got := c.t.Encode(c.v); string(got) != string(c.want) {
			t.Errorf("%s %d: %x, want %x", c.t, c.v, got, c.want)
		}
	}
}

// Every dispatch of the generated model resolves through its bindings to one
// of the pipelines the generator listed, with the argument struct its
// kernel declares.
func TestKernelsFromArtifact(t *testing.T) {
	m := flashNextModel(t)
	k, err := metal.KernelsFrom(m)
	if err != nil {
		t.Fatal(err)
	}
	// The generator lists full tuples; a pipeline sets only the constants
	// its kernel reads.
	listed := map[string]bool{}
	for _, p := range m.Pipelines {
		kern, ok := m.Kernel(p.Kernel)
		if !ok {
			t.Fatalf("pipeline of unknown kernel %s", p.Kernel)
		}
		read := artifact.Pipeline{Kernel: p.Kernel}
		for _, v := range p.Values {
			if slices.Contains(kern.Constants, v.Index) {
				read.Values = append(read.Values, v)
			}
		}
		listed[read.Key()] = true
	}
	for _, rows := range []int{1, 4} {
		g := flashNextGraph(t, rows)
		for i := range g.Dispatches {
			d := &g.Dispatches[i]
			f, err := k.Resolve(d)
			if err != nil {
				t.Fatalf("T=%d dispatch %d: %v", rows, i, err)
			}
			p := artifact.Pipeline{Kernel: f.Name}
			for _, c := range f.Constants {
				p.Values = append(p.Values, artifact.ConstValue{Index: c.Index, Value: c.Value})
			}
			if !listed[p.Key()] {
				t.Fatalf("T=%d dispatch %d resolves to %s, which the generator did not list", rows, i, p.Key())
			}
			kern, _ := m.Kernel(f.Name)
			for _, c := range f.Constants {
				if !slices.Contains(kern.Constants, c.Index) {
					t.Fatalf("T=%d dispatch %d sets constant %d, which kernel %s does not read", rows, i, c.Index, f.Name)
				}
			}
			if _, err := k.Args(d); err != nil {
				t.Fatalf("T=%d dispatch %d: %v", rows, i, err)
			}
		}
	}
	bad := *m
	bad.Missing = []string{"attention_q4_k: no template"}
	if _, err := metal.KernelsFrom(&bad); err == nil {
		t.Error("a model with missing kernels was accepted")
	}
	d := flashNextGraph(t, 1).Dispatches[1]
	d.Kernel = "no_such_kernel"
	if _, err := k.Resolve(&d); err == nil {
		t.Error("a dispatch of an unknown kernel resolved")
	}
}
