package artifact_test

import (
	"encoding/binary"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	_ "github.com/strata-llm/strata/generated/q4-a"
	_ "github.com/strata-llm/strata/generated/qwen3-next-80b-a3b"
	_ "github.com/strata-llm/strata/generated/qwen38-flash-next"
	_ "github.com/strata-llm/strata/generated/tiny-a"
	_ "github.com/strata-llm/strata/generated/tiny-go"
	_ "github.com/strata-llm/strata/generated/tiny-k512"
	"github.com/strata-llm/strata/graph"
)

var generatedModels = []string{"q4-a", "qwen3-next-80b-a3b", "qwen38-flash-next", "tiny-a", "tiny-go", "tiny-k512"}

func TestRegistry(t *testing.T) {
	if got := artifact.Names(); !slices.Equal(got, generatedModels) {
		t.Errorf("registered %v, want %v", got, generatedModels)
	}
	if _, err := artifact.Lookup("no-such-model"); err == nil || !strings.Contains(err.Error(), "tiny-a") {
		t.Errorf("unknown model: %v", err)
	}
}

// Loading a model by name gives everything a backend needs for every
// dispatch of every graph: the kernel in kernels.metal, a pipeline among the
// model's, buffer slots that match the graph's bindings, and the argument
// struct where the ICB plan puts it, with the scalars in MSL layout.
func TestModelsCoverTheirGraphs(t *testing.T) {
	for _, name := range generatedModels {
		t.Run(name, func(t *testing.T) {
			m, err := artifact.Lookup(name)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Missing) > 0 {
				t.Errorf("kernels not emitted: %v", m.Missing)
			}
			src, err := m.Source()
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range m.Kernels {
				if !strings.Contains(string(src), "kernel void "+k.Name+"(") {
					t.Errorf("kernel %s not in kernels.metal", k.Name)
				}
			}
			pipelines := map[string]bool{}
			for _, p := range m.Pipelines {
				pipelines[p.Key()] = true
			}
			used := map[string]bool{}
			if len(m.Shapes(graph.KindTrunk)) == 0 {
				t.Fatal("no trunk graphs")
			}
			for _, ref := range m.Graphs {
				// The big models' graphs are large: check the 1-row and the prefill ones.
				if strings.HasPrefix(name, "qwen") && ref.Rows > 1 && ref.Rows <= m.Config.Windows.MaxDecodeRows {
					continue
				}
				g, err := m.GraphVariant(ref.Kind, ref.Rows, ref.AllLogits)
				if err != nil {
					t.Fatal(err)
				}
				for i := range g.Dispatches {
					d := &g.Dispatches[i]
					checkDispatch(t, m, g, i, d, pipelines)
					p, _ := m.Pipeline(d)
					used[p.Key()] = true
				}
			}
			if !strings.HasPrefix(name, "qwen") && len(used) != len(m.Pipelines) {
				t.Errorf("the graphs use %d pipelines, the model lists %d", len(used), len(m.Pipelines))
			}
		})
	}
}

func checkDispatch(t *testing.T, m *artifact.Artifact, g *graph.Graph, i int, d *graph.Dispatch, pipelines map[string]bool) {
	t.Helper()
	k, ok := m.Kernel(d.Kernel)
	if !ok {
		t.Fatalf("T=%d dispatch %d: no kernel %s", g.Rows, i, d.Kernel)
	}
	p, err := m.Pipeline(d)
	if err != nil || !pipelines[p.Key()] {
		t.Fatalf("T=%d dispatch %d (%s): pipeline %s not listed: %v", g.Rows, i, d.Kernel, p.Key(), err)
	}
	if len(k.Buffers) != len(d.Args) {
		t.Fatalf("T=%d dispatch %d (%s): %d bindings, the kernel takes %d", g.Rows, i, d.Kernel, len(d.Args), len(k.Buffers))
	}
	for j, b := range d.Args {
		if kb := k.Buffers[j]; kb.Slot != b.Slot || kb.Name != b.Name || (b.Access != graph.Read && !kb.Write) {
			t.Fatalf("T=%d dispatch %d (%s): binding %+v, kernel buffer %+v", g.Rows, i, d.Kernel, b, kb)
		}
	}
	args, err := m.EncodeArgs(d.Family, d.Scalars)
	if err != nil {
		t.Fatalf("T=%d dispatch %d (%s): %v", g.Rows, i, d.Kernel, err)
	}
	if len(d.Scalars) == 0 {
		if k.ArgsSlot != -1 || args != nil {
			t.Fatalf("T=%d dispatch %d (%s): argument struct without scalars", g.Rows, i, d.Kernel)
		}
		return
	}
	plan := g.ICB.Commands[i].Args
	if plan == nil || int64(len(args)) != plan.Size || k.ArgsSize != len(args) || plan.Slot != k.ArgsSlot {
		t.Fatalf("T=%d dispatch %d (%s): %d argument bytes at slot %d, the ICB plan says %+v", g.Rows, i, d.Kernel, len(args), k.ArgsSlot, plan)
	}
	for j, s := range d.Scalars {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(args[4*j:])); got != float32(s.Value) {
			t.Fatalf("T=%d dispatch %d (%s): scalar %s encoded as %v, want %v", g.Rows, i, d.Kernel, s.Name, got, float32(s.Value))
		}
	}
}

func TestPipelineErrors(t *testing.T) {
	m, err := artifact.Lookup("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Pipeline(&graph.Dispatch{Kernel: "nope"}); err == nil {
		t.Error("unknown kernel accepted")
	}
	if _, err := m.Pipeline(&graph.Dispatch{Kernel: "swiglu", Family: "swiglu", Consts: []graph.Const{{Name: "nope"}}}); err == nil {
		t.Error("unknown constant accepted")
	}
	if _, err := m.Graph(graph.KindTrunk, 999); err == nil {
		t.Error("missing shape accepted")
	}
	if _, err := m.EncodeArgs("swiglu", []graph.Scalar{{Name: "eps"}}); err == nil {
		t.Error("scalars for a family without an argument struct accepted")
	}
	if _, err := m.EncodeArgs("rmsnorm", []graph.Scalar{{Name: "epsilon"}}); err == nil {
		t.Error("wrong scalars accepted")
	}
}
