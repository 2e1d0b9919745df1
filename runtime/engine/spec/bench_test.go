package spec_test

import (
	"fmt"
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/spec"
	"github.com/strata-llm/strata/runtime/load"
)

// randomDrafter proposes tokens the model almost never produces: the
// workload where drafts miss.
type randomDrafter struct{ state uint32 }

func (r *randomDrafter) Draft(hist []int, n int) ([]int, []float64) {
	var d []int
	var p []float64
	for i := 0; i < n; i++ {
		r.state = r.state*1664525 + 1013904223
		d = append(d, int(r.state>>8)%1024)
		p = append(p, -1) // no estimate: the gate relies on measured acceptance
	}
	return d, p
}

// BenchmarkSpeculation: tokens/s of the spec gate against fixed depths 0–3
// on tiny-k512 (512 experts, top-10: every draft row brings its own
// experts), with drafts that mostly hit (the model's own continuation, one
// in three spoiled) and drafts that miss. Run with
//
//	go test -run XXX -bench Speculation -benchtime 20x .
func BenchmarkSpeculation(b *testing.B) {
	t := &testing.T{}
	l, err := load.HF(e2e.OracleDir("tiny-k512"), e2e.WithGenerator(load.Options{}))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ref := e2e.Ref(t, "tiny-k512")
	prompt := ref.Tokens[:16]
	const n = 48
	plain, err := l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: l.PrefillRows})
	if err != nil {
		b.Fatal(err)
	}
	seq := append(append([]int(nil), prompt...), plain...)
	for _, workload := range []string{"hits", "misses"} {
		for _, depth := range []int{0, 1, 2, 3, engine.Auto} {
			name := fmt.Sprintf("%s/depth=%d", workload, depth)
			if depth == engine.Auto {
				name = workload + "/gate"
			}
			b.Run(name, func(b *testing.B) {
				// The gate lives as long as the model, as in a server: it
				// carries what it measured from one request to the next.
				gate := spec.NewGate(3)
				var tokens int
				for i := 0; i < b.N; i++ {
					var dr interface {
						Draft([]int, int) ([]int, []float64)
					} = &knownDrafter{seq: seq}
					if workload == "misses" {
						dr = &randomDrafter{state: uint32(i)}
					}
					out, err := l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{
						PrefillRows: l.PrefillRows, Spec: engine.SpecOptions{Depth: depth, SuffixDraft: 3, Drafter: dr, Gate: gate},
					})
					if err != nil {
						b.Fatal(err)
					}
					tokens += len(out)
				}
				b.ReportMetric(float64(tokens)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}
