package main

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/spec"
	"github.com/strata-llm/strata/runtime/load"
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

var (
	specRounds   = flag.Int("spec-rounds", 3, "BenchmarkSpeculationStreaming: rounds of every configuration (medians and spread over them)")
	specRequests = flag.Int("spec-requests", 3, "BenchmarkSpeculationStreaming: requests per configuration and round (one gate across them)")
)

// BenchmarkSpeculationStreaming: tokens/s of the spec gate against fixed
// depths 0–3 on a synthesized 2-layer Qwen3-Next-80B-A3B (512 experts,
// top-10, IQ2_XS experts from a 0.94 GB pack) with the arena at 20%, so each
// extra draft row brings its own experts from the pack; with drafts that
// mostly hit and drafts that miss.
//
// Every configuration starts from the same state: each round opens one
// model per configuration (an empty arena, no usage history) and, for the
// gate, a fresh gate that it keeps across the configuration's requests.
// The requests of all configurations are interleaved in a shuffled order,
// request by request, so a burst of load on a shared machine falls on all
// of them alike. The tables give the median over the rounds with the range
// and the gate's ratio to the best fixed depth round by round, in tokens per
// second of wall time and, less sensitive to other work on the machine, per
// second of this process's CPU time. Depth 0 computes the same thing on both
// workloads, so its two rows are a second look at the noise. Run with
//
//	go test -run XXX -bench SpeculationStreaming -benchtime 1x ./cmd/strata/ [-args -spec-rounds 5]
func BenchmarkSpeculationStreaming(b *testing.B) {
	out := filepath.Join(b.TempDir(), "synth.gguf")
	if _, stderr, status := runStrataB("synth", "--model", "qwen3-next-80b-a3b", "--layers", "2", "--no-mtp",
		"--quant", "experts=iq2_xs,trunk=q8_0,embed=q8_0,head=q6_k", "-o", out); status != 0 {
		b.Fatalf("synth: %s", stderr)
	}
	if _, stderr, status := runStrataB("pack", out); status != 0 {
		b.Fatalf("pack: %s", stderr)
	}
	open := func() *load.Loaded {
		l, err := load.GGUF(out, load.GGUFOptions{Options: load.Options{PrefillRows: 4, ArenaExperts: 2 * 512 / 5, History: "-", Generate: generate}})
		if err != nil {
			b.Fatal(err)
		}
		return l
	}
	prompt := []int{11, 22, 33, 44, 55, 66, 77, 88}
	const n = 16
	l := open()
	plain, err := l.Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: 4})
	l.Close()
	if err != nil {
		b.Fatal(err)
	}
	seq := append(append([]int(nil), prompt...), plain...)

	var configs []specConfig
	for _, w := range []string{"hits", "misses"} {
		for _, d := range []int{0, 1, 2, 3, engine.Auto} {
			configs = append(configs, specConfig{w, d})
		}
	}
	for b.Loop() {
		wall, cpu := map[specConfig][]float64{}, map[specConfig][]float64{}
		rows, read := map[specConfig][]float64{}, map[specConfig][]float64{}
		for round := 0; round < *specRounds; round++ {
			models := make([]*load.Loaded, len(configs))
			gates := make([]*spec.Gate, len(configs))
			for i, c := range configs {
				models[i] = open()
				if c.depth == engine.Auto {
					gates[i] = spec.NewGate(3)
				}
			}
			wallT, cpuT := make([]float64, len(configs)), make([]float64, len(configs))
			stats := make([]engine.SpecStats, len(configs))
			rng := rand.New(rand.NewSource(int64(round)))
			for r := 0; r < *specRequests; r++ {
				for _, i := range rng.Perm(len(configs)) {
					c := configs[i]
					var dr spec.Drafter = &oracleDrafter{seq: seq}
					if c.workload == "misses" {
						dr = &missDrafter{state: uint32(r)}
					}
					start, cpu0 := time.Now(), cpuSeconds()
					got, err := models[i].Model.NewSession().Generate(prompt, n, engine.GenerateOptions{PrefillRows: 4,
						Spec: engine.SpecOptions{Depth: c.depth, SuffixDraft: 3, Drafter: dr, Gate: gates[i], Stats: &stats[i]}})
					wallT[i] += time.Since(start).Seconds()
					cpuT[i] += cpuSeconds() - cpu0
					if err != nil {
						b.Fatal(err)
					}
					if !slices.Equal(got, plain) {
						b.Fatalf("%s, depth %d: tokens %v, plain decoding %v", c.workload, c.depth, got, plain)
					}
				}
			}
			tokens := float64(*specRequests * n)
			for i, c := range configs {
				ss := models[i].Model.StreamStats()
				models[i].Close()
				wall[c] = append(wall[c], tokens/wallT[i])
				cpu[c] = append(cpu[c], tokens/cpuT[i])
				rows[c] = append(rows[c], float64(stats[i].Rows)/tokens)
				read[c] = append(read[c], float64(ss.BytesRead)/1e6/tokens)
				report := ""
				if gates[i] != nil {
					report = "; " + gates[i].Report()
				}
				fmt.Printf("round %d, %s, %s: %.3f tok/s, %.3f tok/CPU-s%s\n", round+1, c.workload, depthName(c.depth), tokens/wallT[i], tokens/cpuT[i], report)
			}
		}
		// The work each configuration did, which the machine's load does
		// not blur: rows fed to decode windows (re-runs included) and MB of
		// experts read from the pack (prefill included), per token.
		fmt.Printf("\nwork per generated token (median over the rounds)\n%-8s %-8s %12s %10s\n", "workload", "config", "decode rows", "MB read")
		for _, c := range configs {
			fmt.Printf("%-8s %-8s %12.3f %10.1f\n", c.workload, depthName(c.depth), median(rows[c]), median(read[c]))
		}
		printSpecTable("tokens per second of wall time", wall, configs)
		if !math.IsNaN(cpuSeconds()) {
			printSpecTable("tokens per second of CPU time", cpu, configs)
		}
	}
}

// cpuSeconds is the CPU time this process has used (user and system), from
// /proc/self/stat; NaN where there is none.
func cpuSeconds() float64 {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return math.NaN()
	}
	// The fields after the command name (which may hold spaces, in
	// parentheses): utime and stime are the 12th and 13th, in clock ticks.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	if len(f) < 13 {
		return math.NaN()
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return math.NaN()
	}
	const ticks = 100 // USER_HZ on Linux
	return (utime + stime) / ticks
}

func depthName(d int) string {
	if d == engine.Auto {
		return "gate"
	}
	return fmt.Sprintf("depth %d", d)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// halfRange is half the range of xs as a share of their median: the noise
// of one configuration over the rounds.
func halfRange(xs []float64) float64 {
	return (slices.Max(xs) - slices.Min(xs)) / 2 / median(xs)
}

type specConfig struct {
	workload string
	depth    int // engine.Auto: the gate
}

// printSpecTable prints a rate per configuration (median and range over
// the rounds) and, per workload, the gate against the best fixed depth.
func printSpecTable(title string, rates map[specConfig][]float64, configs []specConfig) {
	fmt.Printf("\n%s\n%-8s %-8s %8s  %-15s %7s\n", title, "workload", "config", "median", "range", "spread")
	for _, c := range configs {
		r := rates[c]
		fmt.Printf("%-8s %-8s %8.3f  %6.3f – %-6.3f %6.1f%%\n", c.workload, depthName(c.depth), median(r), slices.Min(r), slices.Max(r), 100*halfRange(r))
	}
	for _, w := range []string{"hits", "misses"} {
		best := specConfig{w, 0}
		for d := 1; d <= 3; d++ {
			if c := (specConfig{w, d}); median(rates[c]) > median(rates[best]) {
				best = c
			}
		}
		gate := rates[specConfig{w, engine.Auto}]
		var ratios []float64
		for i := range gate {
			ratios = append(ratios, gate[i]/rates[best][i])
		}
		// Noise: the wider spread of the two configurations compared.
		noise := max(halfRange(gate), halfRange(rates[best]))
		ratio := median(gate) / median(rates[best])
		verdict := "within noise"
		if ratio < 1-noise {
			verdict = "SLOWER beyond noise"
		} else if ratio >= 1 {
			verdict = "at least as fast"
		}
		fmt.Printf("%s: best fixed %s; gate ÷ best %.3f (round by round %.3f – %.3f), noise ±%.1f%%: %s\n",
			w, depthName(best.depth), ratio, slices.Min(ratios), slices.Max(ratios), 100*noise, verdict)
	}
	d0h, d0m := median(rates[specConfig{"hits", 0}]), median(rates[specConfig{"misses", 0}])
	fmt.Printf("depth 0 is the same computation on both workloads: medians %.3f and %.3f (%.1f%% apart)\n", d0h, d0m, 100*math.Abs(d0h-d0m)/max(d0h, d0m))
}

// strata run --spec auto keeps the gate's estimates across runs: it saves
// them, reads them back at the next start, and reports, ignores and
// replaces a damaged file or one measured under other settings.
func TestRunSpecState(t *testing.T) {
	state := filepath.Join(t.TempDir(), "tiny-go.spec")
	args := []string{"run", "--spec", "auto", "--spec-state", state}
	run := func(want, key string) {
		t.Helper()
		_, errText, status := runStrata(t, args...)
		if status != 0 {
			t.Fatalf("status %d: %s", status, errText)
		}
		if want == "" && strings.Contains(errText, "warning") || want != "" && !strings.Contains(errText, want) {
			t.Fatalf("stderr %q, want %q", errText, want)
		}
		g := spec.NewGate(3)
		if err := g.Load(state, "tiny-go backend=cpu arena-experts=0 io-threads="+key); err != nil {
			t.Fatalf("the saved state does not load: %v", err)
		}
	}
	run("", "8")
	run("", "8") // read back without complaint
	if err := os.WriteFile(state, []byte("{\"version\": 1, \"win"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("warning: ignoring the spec gate's saved estimates", "8")
	run("", "8")
	args = append(args, "--io-threads", "3")
	run("measured under", "3") // and saved under the new settings
}
