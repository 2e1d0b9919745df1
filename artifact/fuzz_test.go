package artifact_test

import (
	"os"
	"strings"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/graph"
)

// FuzzGraphValidate feeds graph JSON to the decoder and the validation
// against tiny-go's manifest, as a load does: neither may panic, and a
// graph they accept validates again after a round trip through its JSON.
// The seeds are the first dispatches of tiny-go's real graphs (whole
// graphs, hundreds of kilobytes, leave the fuzzer a few executions a
// minute), each checked to validate.
func FuzzGraphValidate(f *testing.F) {
	dir := "../generated/tiny-go/artifact"
	a, err := artifact.Load(os.DirFS(dir))
	if err != nil {
		f.Fatal(err)
	}
	for _, ref := range a.Graphs {
		if ref.Rows > 2 {
			continue
		}
		g, err := a.GraphVariant(ref.Kind, ref.Rows, ref.AllLogits)
		if err != nil {
			f.Fatal(err)
		}
		for _, n := range []int{1, 3, 8} {
			h := *g
			h.Dispatches, h.HostPoints, h.Tensors = g.Dispatches[:n], nil, nil
			h.ICB = graph.PlanICB(&h)
			if err := a.CheckGraph(&h, ref); err != nil {
				f.Fatalf("seed of %d dispatches: %v", n, err)
			}
			j, err := h.JSON()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(j, ref.Kind == graph.KindMTP, ref.Rows, ref.AllLogits)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, mtp bool, rows int, allLogits bool) {
		ref := artifact.GraphRef{Kind: graph.KindTrunk, Rows: rows, AllLogits: allLogits}
		if mtp {
			ref.Kind = graph.KindMTP
		}
		ref.File = strings.TrimSuffix(artifact.GraphFile(ref.Kind, rows, allLogits), ".gz")
		g, err := artifact.ReadGraph(ref.File, data)
		if err == nil {
			err = a.CheckGraph(g, ref)
		}
		if err != nil {
			return
		}
		j, err := g.JSON()
		if err != nil {
			t.Fatalf("a valid graph does not encode: %v", err)
		}
		back, err := graph.Decode(j)
		if err != nil {
			t.Fatalf("a valid graph does not decode again: %v", err)
		}
		if err := a.CheckGraph(back, ref); err != nil {
			t.Fatalf("a valid graph does not validate again: %v", err)
		}
	})
}
