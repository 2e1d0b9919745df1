package gen

import (
	"bytes"
	"strings"
	"testing"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
)

func loadModel(t *testing.T, name string) *models.Config {
	t.Helper()
	c, err := models.Load("../models/" + name + "/model.toml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The generator's output is byte-identical run to run, and the JSON form
// round-trips.
func TestWindowDeterministic(t *testing.T) {
	for _, name := range []string{"tiny-a", "tiny-k512", "q4-a", "qwen3-next-80b-a3b", "qwen38-flash-next"} {
		c := loadModel(t, name)
		for _, rows := range []int{1, 4} {
			g1, err := Window(c, rows, Options{})
			if err != nil {
				t.Fatal(err)
			}
			g2, _ := Window(loadModel(t, name), rows, Options{})
			j1, _ := g1.JSON()
			j2, _ := g2.JSON()
			if !bytes.Equal(j1, j2) {
				t.Fatalf("%s T=%d: two builds differ", name, rows)
			}
			back, err := graph.Decode(j1)
			if err != nil {
				t.Fatal(err)
			}
			j3, _ := back.JSON()
			if !bytes.Equal(j1, j3) {
				t.Fatalf("%s T=%d: JSON does not round-trip", name, rows)
			}
		}
	}
}

// The real model's weights add up to the published size of Qwen3-Next-80B-A3B
// (80B total, 3B active per token, not counting the MTP layer).
func TestRealModelParameterCount(t *testing.T) {
	c := loadModel(t, "qwen3-next-80b-a3b")
	var total, experts float64
	for _, s := range c.Tensors() {
		if strings.HasPrefix(s.Name, "mtp.") {
			continue
		}
		n := float64(s.Elements())
		total += n
		if s.Class == models.ClassExperts {
			experts += n
		}
	}
	m := c.Architecture.MoE
	active := total - experts + experts*float64(m.ExpertsPerToken)/float64(m.NumExperts)
	if total < 78e9 || total > 81e9 {
		t.Errorf("total parameters %.3gB, want about 80B", total/1e9)
	}
	if active < 2.5e9 || active > 4e9 {
		t.Errorf("active parameters %.3gB, want about 3B", active/1e9)
	}
	t.Logf("total %.2fB, active %.2fB", total/1e9, active/1e9)
}

func TestWindowStructure(t *testing.T) {
	c := loadModel(t, "qwen3-next-80b-a3b")
	g, err := Window(c, 4, Options{LastRowLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	a := c.Architecture
	if len(g.HostPoints) != a.NumLayers {
		t.Fatalf("%d host points, want one per layer (%d)", len(g.HostPoints), a.NumLayers)
	}
	for _, h := range g.HostPoints {
		d := g.Dispatches[h.After]
		if d.Family != "router" || d.Layer != h.Layer {
			t.Fatalf("host point of layer %d follows %s of layer %d, want the router", h.Layer, d.Family, d.Layer)
		}
		// The shared expert sits between the signal and the routed experts.
		next := g.Dispatches[h.After+1]
		if next.Family != "matmul" || next.Args[1].Offset != mustTensor(t, g, models.LayerTensor(h.Layer, "moe.shared.gate")).Offset {
			t.Fatalf("layer %d: dispatch after the host point is %s, want the shared expert", h.Layer, next.Kernel)
		}
	}
	ex, _ := g.Buffer(BufExperts)
	// Every trunk layer and the MTP layer hold 512 bf16 experts.
	want := int64(a.NumLayers+a.MTP.NumLayers) * int64(a.MoE.NumExperts) * 3 * int64(a.MoE.IntermediateSize) * int64(a.HiddenSize) * 2
	if ex.Size != want {
		t.Errorf("experts buffer %d bytes, want %d", ex.Size, want)
	}
	out, _ := g.Output(0)
	if out.Size != int64(a.VocabSize)*4 {
		t.Errorf("last-row logits are %d bytes, want one row of %d floats", out.Size, a.VocabSize)
	}
	if g.Dispatches[0].Barrier {
		t.Error("the first dispatch has a barrier")
	}
}

func mustTensor(t *testing.T, g *graph.Graph, name string) graph.Tensor {
	t.Helper()
	for _, x := range g.Tensors {
		if x.Name == name {
			return x
		}
	}
	t.Fatalf("no tensor %s", name)
	return graph.Tensor{}
}

// Qwen3.8-Flash-Next at its real dimensions: the decode state the window
// graphs allocate equals the sum of the spec's per-layer state shapes
// (qwen4_exp.md §7), for every decode shape T = 1…4.
func TestFlashNextStateSizes(t *testing.T) {
	c := loadModel(t, "qwen38-flash-next")
	const (
		ctx     = 32768 // runtime.context_length
		gdn     = 36
		qsa     = 12
		hidden  = 2560
		streams = 4
	)
	perGDN := 48*128*128*4 + // recurrent state [48, 128, 128] f32: 3 MiB
		3*10240*4 // conv state: the last 3 of 4 pre-conv inputs of 10240 channels
	perQSA := 2*ctx*2*256*4 + // K and V cache [2 kv heads, ctx, 256]
		ctx*128*4 + // raw index-key cache [ctx, 128]
		ctx/4*128*4 // pooled block keys [ctx/4, 128]
	ple := 9 * streams * hidden * 4 // PLE conv state: the last 9 norm_conv outputs of 10240 channels
	wantState, wantKV := int64(gdn*perGDN+ple), int64(qsa*perQSA)
	for rows := 1; rows <= 4; rows++ {
		g, err := Window(c, rows, Options{})
		if err != nil {
			t.Fatal(err)
		}
		st, _ := g.Buffer(BufState)
		kv, _ := g.Buffer(BufKV)
		if st.Size != wantState || kv.Size != wantKV {
			t.Errorf("T=%d: rolling state %d and KV caches %d bytes, want %d and %d from the spec's shapes", rows, st.Size, kv.Size, wantState, wantKV)
		}
		ex, _ := g.Buffer(BufExperts)
		// 48 trunk + 1 MTP layer of 512 experts, gate/up [640, 2560] and down [2560, 640] in bf16.
		if want := int64(49 * 512 * 3 * 640 * 2560 * 2); ex.Size != want {
			t.Errorf("T=%d: experts buffer %d bytes, want %d", rows, ex.Size, want)
		}
		if len(g.HostPoints) != 48 {
			t.Errorf("T=%d: %d host points, want 48", rows, len(g.HostPoints))
		}
		if p, ok := g.Param(graph.ParamPLE(1)); !ok || p.Count != rows*2560 {
			t.Errorf("T=%d: PLE params field %+v, want %d floats for layer 1", rows, p, rows*2560)
		}
	}
}
