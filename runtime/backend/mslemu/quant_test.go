package mslemu_test

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/load"
	"github.com/strata-llm/strata/runtime/weights"
)

// The quantized storage formats' MSL decoders (templates/msl/formats), run
// by mslemu against the cpu backend, whose quantized kernels are Go
// (models/quant's Dot, tested against hand-built blocks).

// TestMSLEmuQuantGGUF converts oracles with quant plans and runs each file
// on the mslemu backend and on the cpu backend: a full prefill of the
// reference tokens (every row's logits), then greedy decoding of the
// quantized model from the first 16 tokens, 8 tokens one row at a time. The
// logits agree per position within e2e.QuantLogitsTol and the greedy tokens are
// equal; a prefill under AddressSanitizer reads nothing outside the ranges
// its dispatches declare.
func TestMSLEmuQuantGGUF(t *testing.T) {
	e2e.RequireEmulator(t)
	const prompt, steps = 16, 8
	formats := map[string]bool{}
	for _, tc := range e2e.QuantGGUFCases {
		t.Run(tc.Oracle+"/"+tc.Plan, func(t *testing.T) {
			if testing.Short() && tc.Slow {
				t.Skip("-short: the slowest plan (TestMSLEmuQuantKernels covers its formats)")
			}
			start := time.Now()
			path, _ := e2e.ConvertOracle(t, tc.Oracle, tc.Plan, t.TempDir())
			ref := e2e.Ref(t, tc.Oracle)
			opt := load.Options{AllLogits: true, PrefillRows: len(ref.Tokens)}
			onCPU := e2e.GGUF(t, path, load.GGUFOptions{Options: opt})
			emuOpt := e2e.MSLEmuOptions(t)
			emuOpt.AllLogits, emuOpt.PrefillRows = true, len(ref.Tokens)
			emu := e2e.GGUF(t, path, load.GGUFOptions{Options: emuOpt})

			// The kernels mslemu was built with: quantized, none missing.
			graphs, err := gen.Windows(emu.Config, true, len(ref.Tokens))
			if err != nil {
				t.Fatal(err)
			}
			am, err := gen.Kernels(emu.Config, graphs)
			if err != nil {
				t.Fatal(err)
			}
			if len(am.Missing) > 0 {
				t.Fatalf("kernels missing: %v", am.Missing)
			}
			var quantized []string
			for _, k := range am.Kernels {
				if f := kernelFormat(k.Name); f != "" && quantFormat(f) {
					quantized = append(quantized, k.Name)
					formats[f] = true
				}
			}
			if len(quantized) == 0 {
				t.Fatal("no kernel reads a quantized format: the plan did not reach the kernels")
			}

			worst := 0.0
			want := e2e.RunLogits(t, onCPU, ref.Tokens, len(ref.Tokens))
			got := e2e.RunLogits(t, emu, ref.Tokens, len(ref.Tokens))
			for i := range want {
				if e := e2e.RelL2(got[i], want[i]); !(e <= e2e.QuantLogitsTol) {
					t.Errorf("prefill position %d: relative L2 %.3g between mslemu and cpu > %.0e", i, e, e2e.QuantLogitsTol)
				} else {
					worst = math.Max(worst, e)
				}
			}
			decode := func(l *load.Loaded) ([]int, [][]float32) {
				var logits [][]float32
				toks, err := l.Model.NewSession().Generate(ref.Tokens[:prompt], steps, engine.GenerateOptions{PrefillRows: prompt,
					OnLogits: func(r []float32) error {
						logits = append(logits, r)
						return nil
					}})
				if err != nil {
					t.Fatal(err)
				}
				return toks, logits
			}
			wantToks, wantLogits := decode(onCPU)
			gotToks, gotLogits := decode(emu)
			if !slices.Equal(gotToks, wantToks) {
				t.Errorf("greedy tokens %v, the cpu backend's %v", gotToks, wantToks)
			}
			for i := range min(len(wantLogits), len(gotLogits)) {
				if e := e2e.RelL2(gotLogits[i], wantLogits[i]); !(e <= e2e.QuantLogitsTol) {
					t.Errorf("decode step %d: relative L2 %.3g between mslemu and cpu > %.0e", i, e, e2e.QuantLogitsTol)
				} else {
					worst = math.Max(worst, e)
				}
			}
			// A 16-row prefill with AddressSanitizer: every byte of a buffer
			// outside the ranges a dispatch declares is poisoned, so a
			// decoder reading past its tensor into a neighbour is reported
			// (a q4_k decoder one block off is; past the end of a buffer,
			// in its last page, nothing is poisoned).
			if !tc.Slow {
				asanOpt := emuOpt
				asanOpt.MSLEmu.Sanitize, asanOpt.PrefillRows = mslemu.Address, prompt
				l, err := load.GGUF(path, load.GGUFOptions{Options: e2e.WithGenerator(asanOpt)})
				if err != nil && strings.Contains(err.Error(), "libclang_rt") && os.Getenv("STRATA_REQUIRE_CLANG") == "" {
					t.Logf("skipping the AddressSanitizer prefill: %v", err)
				} else if err != nil {
					t.Fatal(err)
				} else {
					defer l.Close()
					for i, r := range e2e.RunLogits(t, l, ref.Tokens[:prompt], prompt) {
						if e := e2e.RelL2(r, want[i]); !(e <= e2e.QuantLogitsTol) {
							t.Errorf("AddressSanitizer prefill position %d: relative L2 %.3g between mslemu and cpu > %.0e", i, e, e2e.QuantLogitsTol)
						}
					}
				}
			}
			t.Logf("%s %s: kernels %v; mslemu vs cpu worst per-position relative L2 %.2g over %d prefill rows, then %d rows of a %d-token prompt and %d decode steps; greedy tokens equal; %v",
				tc.Oracle, tc.Plan, quantized, worst, len(want), len(wantLogits), prompt, steps, time.Since(start).Round(time.Millisecond))
		})
	}
	if !testing.Short() {
		for _, f := range e2e.QuantFormats() {
			if !formats[f] {
				t.Errorf("no plan runs a kernel in format %s", f)
			}
		}
	}
}

// kernelFormat is the storage format a kernel name ends in ("" if none).
func kernelFormat(kernel string) string {
	for _, f := range quant.Names() {
		if strings.HasSuffix(kernel, "_"+f) {
			return f
		}
	}
	return ""
}

func quantFormat(name string) bool { return slices.Contains(e2e.QuantFormats(), name) }

// quantDiff runs a model on the cpu backend and, dispatch by dispatch, every
// dispatch whose kernel reads a quantized format also through mslemu from
// the same state, with its write-only outputs NaN-filled on both sides
// (diffBackend's memories), and records the error of what it wrote,
// normalized as TestMSLEmuKernels does, per kernel. The other dispatches run
// on the cpu only.
type quantDiff struct {
	*diffBackend                    // its NewMemory: the engine's cpu memory, the reference's and the emulator's
	byKernel     map[string]int     // dispatches compared
	worstOf      map[string]float64 // largest normalized error, by kernel
	failures     []string
}

func newQuantDiff(t *testing.T, emu *mslemu.Emulator, am *artifact.Artifact) *quantDiff {
	b := &quantDiff{diffBackend: &diffBackend{t: t, emu: emu, model: am}, byKernel: map[string]int{}, worstOf: map[string]float64{}}
	b.only = func(kernel string) bool { return quantFormat(kernelFormat(kernel)) }
	b.check = b.compare
	return b
}

// compare records the worst normalized error of what the step wrote; an
// element NaN on one side only counts as infinite.
func (b *quantDiff) compare(g *graph.Graph, s *diffStep, m *diffMemory) {
	b.byKernel[s.d.Kernel]++
	for _, a := range s.out {
		want, _ := m.ref.Bytes(a.Range)
		got, _ := m.emu.Bytes(a.Range)
		wf, gf := backend.Float32s(want), backend.Float32s(got)
		var ss float64
		n := 0
		for _, v := range wf {
			if !math.IsNaN(float64(v)) {
				ss += float64(v) * float64(v)
				n++
			}
		}
		rms := math.Sqrt(ss / float64(max(n, 1)))
		worst, at := 0.0, -1
		for i := range wf {
			w, v := float64(wf[i]), float64(gf[i])
			e := 0.0
			switch {
			case math.IsNaN(w) && math.IsNaN(v):
				continue
			case math.IsNaN(w) != math.IsNaN(v):
				e = math.Inf(1)
			default:
				e = math.Abs(v-w) / math.Max(math.Max(math.Abs(w), rms), 1e-30)
			}
			if e > worst {
				worst, at = e, i
			}
		}
		b.worstOf[s.d.Kernel] = math.Max(b.worstOf[s.d.Kernel], worst)
		if worst > kernelTol && len(b.failures) < 20 {
			b.failures = append(b.failures, fmt.Sprintf("%s T=%d dispatch %d (%s, layer %d) binding %s: element %d is %g, the cpu backend's %g (error %.2g of max(|value|, rms %.3g))",
				g.Kind, g.Rows, s.index, s.d.Kernel, s.d.Layer, a.Name, at, gf[at], wf[at], worst, rms))
		}
	}
}

// runQuantDiff loads model c on a quantDiff over emulator emu (built from
// am) with random weights and runs it: a full prefill window, one with
// fewer live rows than its shape and two decode rows; with spec, also
// windows of speculative rows with MTP drafts.
func runQuantDiff(t *testing.T, c *models.Config, graphs []*graph.Graph, am *artifact.Artifact, emu *mslemu.Emulator, spec bool) *quantDiff {
	t.Helper()
	b := newQuantDiff(t, emu, am)
	m, err := engine.LoadWith(c, graphs, weights.NewRandom(7), b)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	rng := rand.New(rand.NewSource(1))
	tokens := make([]int, 40)
	for i := range tokens {
		tokens[i] = rng.Intn(c.Architecture.VocabSize)
	}
	pre := c.Windows.PrefillRows
	if _, err := m.NewSession().Generate(tokens[:pre+pre/2], 2, engine.GenerateOptions{PrefillRows: pre}); err != nil {
		t.Fatal(err)
	}
	if spec {
		_, err = m.NewSession().Generate(tokens[:pre+3], 3, engine.GenerateOptions{PrefillRows: pre,
			Spec: engine.SpecOptions{Depth: c.Windows.MaxDecodeRows - 1, MTP: true}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// TestMSLEmuQuantKernels: every quantized format through matmul (trunk and
// head), moe_gate_up, moe_down and embed, dispatch by dispatch against the
// cpu backend on random quantized weights (blocks really quantized from
// noise), in prefill windows with all and with some rows live, decode rows
// and (one model) MTP draft windows.
func TestMSLEmuQuantKernels(t *testing.T) {
	e2e.RequireEmulator(t)
	configs, graphs, am := e2e.QuantKernelModels(t)
	emu, err := mslemu.New(am, mslemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	compared := map[string]int{}
	for i, c := range configs {
		t.Run(fmt.Sprintf("%s_%s_%s_%s", c.Quant.Trunk, c.Quant.Experts, c.Quant.Embeddings, c.Quant.Head), func(t *testing.T) {
			b := runQuantDiff(t, c, graphs[i], am, emu, i == 0)
			for _, f := range b.failures {
				t.Error(f)
			}
			var kernels, report []string
			for k := range b.byKernel {
				kernels = append(kernels, k)
			}
			sort.Strings(kernels)
			for _, k := range kernels {
				compared[k] += b.byKernel[k]
				report = append(report, fmt.Sprintf("%s %d (worst %.1e)", k, b.byKernel[k], b.worstOf[k]))
			}
			t.Logf("dispatches compared: %s", strings.Join(report, ", "))
		})
	}
	for _, f := range e2e.QuantFormats() {
		for _, family := range []string{"matmul", "moe_gate_up", "moe_down", "embed"} {
			if compared[family+"_"+f] == 0 {
				t.Errorf("kernel %s_%s was never compared", family, f)
			}
		}
	}
}

// brokenDecoders are deliberate faults, one per format, each an edit of
// its decoder in kernels.metal: a scale from the wrong nibble or byte, a
// level from the wrong byte or nibble.
var brokenDecoders = map[string][2]string{
	// q8_0: the levels' bytes swapped in pairs.
	"q8_0": {"ushort2(q[2 * j], q[2 * j + 1])", "ushort2(q[2 * j + 1], q[2 * j])"},
	// q4_k: sub-blocks 4–7 take the min's nibble as their scale.
	"q4_k": {"(sj4 & 15) | (sjm4 >> 6) << 4", "(sj4 >> 4) | (sjm4 >> 6) << 4"},
	// q6_k: each 16 elements scaled by their neighbours' scale.
	"q6_k": {"int(b[192 + is])", "int(b[192 + (is ^ 1)])"},
	// iq2_xs: the other nibble of the scale byte.
	"iq2_xs": {"b[66 + p / 2] >> (4 * (p % 2)) & 15", "b[66 + p / 2] >> (4 * (1 - p % 2)) & 15"},
	// iq4_nl: one element of four from the high nibble.
	"iq4_nl": {"d * float4(kvalues_iq4nl[u & 15]", "d * float4(kvalues_iq4nl[u >> 4 & 15]"},
	// iq4_xs: the other sub-block's low scale bits.
	"iq4_xs": {"b[4 + ib / 2] >> (4 * (ib % 2)) & 15", "b[4 + ib / 2] >> (4 * (1 - ib % 2)) & 15"},
	// q4_0, q4_1: the other nibble of the level bytes.
	"q4_0": {"u >> shift & 0x0F0F0F0Fu)) - 8.0f", "u >> (4 - shift) & 0x0F0F0F0Fu)) - 8.0f"},
	"q4_1": {"q[j] >> shift & 0x0F0F0F0Fu)) + dm.y", "q[j] >> (4 - shift) & 0x0F0F0F0Fu)) + dm.y"},
	// q5_0, q5_1: the fifth bits of the other half block.
	"q5_0": {"((device const ushort *)(b + 2))[c % 2]", "((device const ushort *)(b + 2))[1 - c % 2]"},
	"q5_1": {"*(device const uint *)(b + 4) >> (16 * (c % 2))", "*(device const uint *)(b + 4) >> (16 * (1 - c % 2))"},
	// q2_k: the scale's nibble taken as the min.
	"q2_k": {"dm.y * float(sc >> 4)", "dm.y * float(sc & 15)"},
	// q3_k, q5_k: the neighbouring group's high bits.
	"q3_k": {"h >> (g / 2) & 0x01010101u", "h >> (g / 2 ^ 1) & 0x01010101u"},
	"q5_k": {"(h.x >> j & 0x01010101u) << 4", "(h.x >> (j ^ 1) & 0x01010101u) << 4"},
}

// TestMSLEmuQuantKernelsCatchBrokenDecoders is the control for
// TestMSLEmuQuantKernels: with the faults of brokenDecoders in its
// kernels.metal, the kernels of every format disagree with the cpu backend
// far past kernelTol. Every fourth model of quantKernelConfig (i = 0, 4, …)
// holds four formats, so between them all.
func TestMSLEmuQuantKernelsCatchBrokenDecoders(t *testing.T) {
	e2e.RequireEmulator(t)
	configs, graphs, am := e2e.QuantKernelModels(t)
	src, err := am.Source()
	if err != nil {
		t.Fatal(err)
	}
	text := string(src)
	for _, f := range e2e.QuantFormats() {
		fault, ok := brokenDecoders[f]
		if !ok {
			t.Fatalf("no fault for format %s", f)
		}
		if n := strings.Count(text, fault[0]); n != 1 {
			t.Fatalf("%s: %q appears %d times in kernels.metal, expected once: the fault is stale", f, fault[0], n)
		}
		text = strings.Replace(text, fault[0], fault[1], 1)
	}
	emu, err := mslemu.New(withSource(am, text), mslemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	caught := map[string]float64{}
	for i := 0; i < len(configs); i += 4 {
		b := runQuantDiff(t, configs[i], graphs[i], am, emu, false)
		var kernels, report []string
		for k := range b.worstOf {
			kernels = append(kernels, k)
		}
		sort.Strings(kernels)
		for _, k := range kernels {
			f := kernelFormat(k)
			caught[f] = math.Max(caught[f], b.worstOf[k])
			report = append(report, fmt.Sprintf("%s %.2g", k, b.worstOf[k]))
		}
		t.Logf("broken decoders, worst error per kernel: %s", strings.Join(report, ", "))
	}
	for _, f := range e2e.QuantFormats() {
		if !(caught[f] > 100*kernelTol) {
			t.Errorf("%s: a broken decoder gives a worst error of only %.2g (kernelTol %.0e)", f, caught[f], kernelTol)
		}
	}
}
