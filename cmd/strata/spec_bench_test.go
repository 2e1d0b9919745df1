package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/strata-llm/strata"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/spec"
)

// oracleDrafter drafts a known continuation, spoiled at about one position in
// three: the workload where drafts mostly hit.
type oracleDrafter struct{ seq []int }

func (o *oracleDrafter) Draft(hist []int, n int) ([]int, []float64) {
	var d []int
	var p []float64
	for i := len(hist); i < len(o.seq) && len(d) < n; i++ {
		tok := o.seq[i]
		if (uint32(i)*2654435761)>>16%3 == 0 {
			tok = (tok + 1) % 151936
		}
		d, p = append(d, tok), append(p, -1)
	}
	return d, p
}

// missDrafter drafts tokens the model does not produce.
type missDrafter struct{ state uint32 }

func (m *missDrafter) Draft(hist []int, n int) ([]int, []float64) {
	var d []int
	var p []float64
	for i := 0; i < n; i++ {
		m.state = m.state*1664525 + 1013904223
		d, p = append(d, int(m.state>>8)%151936), append(p, -1)
	}
	return d, p
}

// BenchmarkSpeculationStreaming: tokens/s of the spec gate against fixed
// depths 0–3 on a synthesized 2-layer Qwen3-Next-80B-A3B (512 experts,
// top-10, IQ2_XS experts from a 0.94 GB pack) with the arena at 20%, so each
// extra draft row brings its own experts from the pack; with drafts that
// mostly hit and drafts that miss. The gate is kept across requests. Run with
//
//	go test -run XXX -bench SpeculationStreaming -benchtime 1x ./cmd/strata/
func BenchmarkSpeculationStreaming(b *testing.B) {
	out := filepath.Join(b.TempDir(), "synth.gguf")
	if _, stderr, status := runStrataB("synth", "--model", "qwen3-next-80b-a3b", "--layers", "2", "--no-mtp",
		"--quant", "experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k", "-o", out); status != 0 {
		b.Fatalf("synth: %s", stderr)
	}
	if _, stderr, status := runStrataB("pack", out); status != 0 {
		b.Fatalf("pack: %s", stderr)
	}
	l, err := strata.OpenGGUF(out, strata.GGUFOptions{HFOptions: strata.HFOptions{PrefillRows: 4, ArenaExperts: 2 * 512 / 5, History: "-"}})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	prompt := []int{11, 22, 33, 44, 55, 66, 77, 88}
	const n, requests = 16, 3
	plain, err := l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: 4})
	if err != nil {
		b.Fatal(err)
	}
	seq := append(append([]int(nil), prompt...), plain...)
	for b.Loop() {
		for _, workload := range []string{"hits", "misses"} {
			gate := spec.NewGate(3)
			for _, depth := range []int{0, 1, 2, 3, engine.Auto} {
				var tokens int
				start := time.Now()
				for r := 0; r < requests; r++ {
					var dr spec.Drafter = &oracleDrafter{seq: seq}
					if workload == "misses" {
						dr = &missDrafter{state: uint32(r)}
					}
					got, err := l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: 4,
						Spec: engine.SpecOptions{Depth: depth, SuffixDraft: 3, Drafter: dr, Gate: gate}})
					if err != nil {
						b.Fatal(err)
					}
					tokens += len(got)
				}
				name := fmt.Sprintf("depth %d", depth)
				if depth == engine.Auto {
					name = "gate"
				}
				fmt.Printf("%s, %s: %.2f tok/s\n", workload, name, float64(tokens)/time.Since(start).Seconds())
			}
			fmt.Printf("%s: %s\n", workload, gate.Report())
		}
	}
}
