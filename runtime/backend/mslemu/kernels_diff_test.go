package mslemu_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/weights"
)

// Per kernel family, mslemu against the cpu backend on random inputs, one
// dispatch at a time: a diffBackend runs every window on the cpu backend
// (the engine sees only that), and before each dispatch copies the state into
// a second cpu memory and the emulator's memory, fills every range the
// dispatch only writes with NaN there, runs the dispatch on both and compares
// what it wrote. An element the MSL leaves unwritten stays NaN and fails.

// kernelTol bounds |mslemu − cpu| per float element, relative to the larger
// of the element and the RMS of its binding (float32 against float64
// accumulation).
const kernelTol = 2e-4

type diffBackend struct {
	t     *testing.T
	emu   *mslemu.Emulator
	model *artifact.Artifact

	mem *diffMemory // the last one made
	// only picks the kernels compared (nil: all); the others run on the
	// cpu alone. check replaces compare.
	only  func(kernel string) bool
	check func(g *graph.Graph, s *diffStep, m *diffMemory)

	mu       sync.Mutex
	compared map[graph.Family]int     // dispatches compared, by family
	worst    map[graph.Family]float64 // largest normalized float error, by family
	errors   int
}

type diffMemory struct {
	*backend.HostMemory                     // the engine's state, advanced by the cpu backend
	ref                 *backend.HostMemory // the cpu on poisoned inputs
	emu                 backend.Memory
	weights, state      []string // buffer names: constant after loading; the rest
	weightsCopied       bool
}

func (b *diffBackend) NewMemory(graphs ...*graph.Graph) (backend.Memory, error) {
	c, err := backend.NewHostMemory(graphs...)
	if err != nil {
		return nil, err
	}
	r, err := backend.NewHostMemory(graphs...)
	if err != nil {
		return nil, err
	}
	e, err := b.emu.NewMemory(graphs...)
	if err != nil {
		return nil, err
	}
	m := &diffMemory{HostMemory: c, ref: r, emu: e}
	b.mem = m
	seen := map[string]bool{}
	for _, g := range graphs {
		for _, buf := range g.Buffers {
			if seen[buf.Name] {
				continue
			}
			seen[buf.Name] = true
			if buf.Kind == graph.KindWeights || buf.Kind == graph.KindExperts {
				m.weights = append(m.weights, buf.Name)
			} else {
				m.state = append(m.state, buf.Name)
			}
		}
	}
	return m, nil
}

type diffStep struct {
	d              *graph.Dispatch
	canon, ref     *cpu.Program
	emu            backend.Program // nil: not compared, cpu only
	index          int
	kernel         *artifact.Kernel
	writeOnly, out []graph.Binding
}

type diffProgram struct {
	b     *diffBackend
	mem   *diffMemory
	g     *graph.Graph
	steps []diffStep
}

func (b *diffBackend) Compile(g *graph.Graph, mem backend.Memory) (backend.Program, error) {
	m := mem.(*diffMemory)
	p := &diffProgram{b: b, mem: m, g: g}
	for i := range g.Dispatches {
		single := *g
		single.Dispatches = g.Dispatches[i : i+1]
		single.HostPoints, single.ICB = nil, nil
		s := diffStep{d: &g.Dispatches[i], index: i}
		var err error
		if s.canon, err = cpu.Compile(&single, m.HostMemory); err != nil {
			return nil, err
		}
		if b.only != nil && !b.only(s.d.Kernel) {
			p.steps = append(p.steps, s)
			continue
		}
		if s.ref, err = cpu.Compile(&single, m.ref); err != nil {
			return nil, err
		}
		if s.emu, err = b.emu.Compile(&single, m.emu); err != nil {
			return nil, err
		}
		s.kernel, _ = b.model.Kernel(s.d.Kernel)
		for _, a := range s.d.Args {
			if a.Access == graph.Write {
				s.writeOnly = append(s.writeOnly, a)
			}
			if a.Access != graph.Read {
				s.out = append(s.out, a)
			}
		}
		p.steps = append(p.steps, s)
	}
	return p, nil
}

func (m *diffMemory) sync() {
	names := m.state
	if !m.weightsCopied {
		names = append(append([]string{}, m.weights...), m.state...)
		m.weightsCopied = true
	}
	for _, name := range names {
		copy(m.ref.Buffer(name), m.Buffer(name))
		copy(m.emu.Buffer(name), m.Buffer(name))
	}
}

func (p *diffProgram) Run() error {
	for i := range p.steps {
		s := &p.steps[i]
		if s.emu == nil {
			s.canon.Run()
			continue
		}
		p.mem.sync()
		for _, a := range s.writeOnly {
			poison(p.mem.ref, a, elemType(s.kernel, a.Name))
			poison(p.mem.emu, a, elemType(s.kernel, a.Name))
		}
		s.ref.Run()
		if err := s.emu.Run(); err != nil {
			return err
		}
		s.canon.Run()
		if p.b.check != nil {
			p.b.check(p.g, s, p.mem)
		} else {
			p.b.compare(p.g, s, p.mem)
		}
	}
	return nil
}

func elemType(k *artifact.Kernel, name string) string {
	for _, b := range k.Buffers {
		if b.Name == name {
			return b.Type
		}
	}
	return "float"
}

func poison(m backend.Memory, a graph.Binding, typ string) {
	b, err := m.Bytes(a.Range)
	if err != nil {
		panic(err)
	}
	word := uint32(0x7fc00bad) // a quiet NaN
	if typ != "float" {
		word = 0xdeadbeef
	}
	for i := 0; i+4 <= len(b); i += 4 {
		binary.LittleEndian.PutUint32(b[i:], word)
	}
}

func (b *diffBackend) compare(g *graph.Graph, s *diffStep, m *diffMemory) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.compared[s.d.Family]++
	for _, a := range s.out {
		want, _ := m.ref.Bytes(a.Range)
		got, _ := m.emu.Bytes(a.Range)
		where := fmt.Sprintf("%s T=%d dispatch %d (%s, layer %d) binding %s", g.Kind, g.Rows, s.index, s.d.Kernel, s.d.Layer, a.Name)
		if elemType(s.kernel, a.Name) != "float" {
			for i := 0; i+4 <= len(want); i += 4 {
				w, v := binary.LittleEndian.Uint32(want[i:]), binary.LittleEndian.Uint32(got[i:])
				if w != v {
					b.fail("%s: element %d is %#x, the cpu backend's %#x", where, i/4, v, w)
					break
				}
			}
			continue
		}
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
		for i := range wf {
			w, v := float64(wf[i]), float64(gf[i])
			if math.IsNaN(w) != math.IsNaN(v) {
				what := "left unwritten (NaN)"
				if math.IsNaN(w) {
					what = fmt.Sprintf("written (%g) where the cpu backend writes nothing", v)
				}
				b.fail("%s: element %d %s; the cpu backend's is %g", where, i, what, w)
				break
			}
			if math.IsNaN(w) {
				continue
			}
			e := math.Abs(v-w) / math.Max(math.Max(math.Abs(w), rms), 1e-30)
			if e > b.worst[s.d.Family] {
				b.worst[s.d.Family] = e
			}
			if e > kernelTol {
				b.fail("%s: element %d is %g, the cpu backend's %g (error %.2g of max(|value|, rms %.3g))", where, i, v, w, e, rms)
				break
			}
		}
	}
}

func (b *diffBackend) fail(format string, args ...any) {
	b.errors++
	if b.errors <= 20 {
		b.t.Errorf(format, args...)
	}
}

// oddConfigs are small models with sizes off every tile: hidden sizes,
// head dims, expert counts and vocabularies that are not multiples of 32 (or
// of the threadgroups, 32·⌈n/32⌉ threads), window shapes that are not
// multiples of matmul's 8-row batch, stored in bf16 and f16 as well as f32.
func oddConfigs(t *testing.T) []*models.Config {
	a, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	a.Name = "odd-a"
	arch := &a.Architecture
	arch.HiddenSize, arch.VocabSize = 76, 301
	arch.Attention.NumHeads, arch.Attention.NumKVHeads, arch.Attention.HeadDim = 3, 1, 24
	arch.LinearAttention.NumKeyHeads, arch.LinearAttention.NumValueHeads = 2, 6
	arch.LinearAttention.KeyHeadDim, arch.LinearAttention.ValueHeadDim = 20, 12
	arch.MoE.NumExperts, arch.MoE.ExpertsPerToken = 40, 3
	arch.MoE.IntermediateSize, arch.MoE.SharedExpertIntermediateSize = 20, 36
	arch.MTP.NumLayers = 1
	a.Quant = models.QuantPlan{Trunk: "bf16", Experts: "f16", Embeddings: "f16", Head: "f32"}
	a.Windows.MaxDecodeRows, a.Windows.PrefillRows = 3, 11

	q, err := models.Embedded("q4-a")
	if err != nil {
		t.Fatal(err)
	}
	q.Name = "odd-q4"
	arch = &q.Architecture
	arch.HiddenSize, arch.VocabSize = 44, 203
	arch.Attention.NumHeads, arch.Attention.NumKVHeads, arch.Attention.HeadDim = 3, 3, 40
	arch.LinearAttention.NumKeyHeads, arch.LinearAttention.NumValueHeads = 1, 3
	arch.LinearAttention.KeyHeadDim, arch.LinearAttention.ValueHeadDim = 36, 20
	arch.MoE.NumExperts, arch.MoE.ExpertsPerToken = 70, 5
	arch.MoE.IntermediateSize, arch.MoE.SharedExpertIntermediateSize = 28, 12
	arch.HyperConnections.Count, arch.HyperConnections.LowRank = 3, 12
	arch.Indexer.Heads, arch.Indexer.HeadDim, arch.Indexer.Budget, arch.Indexer.CompressRatio = 3, 12, 9, 3
	arch.PLE.EmbedDim = 44
	arch.MTP.NumLayers = 1
	q.Windows.MaxDecodeRows, q.Windows.PrefillRows = 4, 13
	// Cache-aware routing with read-ahead, λ low enough that residency
	// reorders the unprotected ranks (the test marks experts non-resident at
	// random).
	q.Runtime.MoCE, q.Runtime.ReadAhead = true, true
	q.Runtime.MoCELambda, q.Runtime.MoCEProtect, q.Runtime.MoCEMaxRank = 0.3, 2, 12

	// Every row choosing every expert, in a prefill window of more than one
	// 32-row tile of the matrix units: moe_gate_up gathers more rows for an
	// expert than one tile takes and resumes its scan; the matmuls run a
	// full row tile and a partial one. Expert rows of 72 take moe_down's
	// tiles over three steps of matmul_mma_depth columns, the last partial.
	w, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	w.Name = "crowded-a"
	w.Architecture.MoE.NumExperts, w.Architecture.MoE.ExpertsPerToken = 3, 3
	w.Architecture.MoE.IntermediateSize = 72
	w.Windows.MaxDecodeRows, w.Windows.PrefillRows = 2, 37
	return []*models.Config{a, q, w}
}

// TestMSLEmuKernels: every kernel family the generator has, dispatch by
// dispatch through mslemu and through the cpu backend from the same random
// state, in prefill windows with all and with some rows live, decode windows
// and MTP draft windows, past the start of the KV cache and the indexer's
// selection budget.
func TestMSLEmuKernels(t *testing.T) {
	e2e.RequireEmulator(t)
	compared := map[graph.Family]int{}
	for _, c := range oddConfigs(t) {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Validate(); err != nil {
				t.Fatal(err)
			}
			graphs, err := gen.Windows(c, true)
			if err != nil {
				t.Fatal(err)
			}
			am, err := gen.Kernels(c, graphs)
			if err != nil {
				t.Fatal(err)
			}
			emu, err := mslemu.New(am, mslemu.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer emu.Close()
			b := &diffBackend{t: t, emu: emu, model: am, compared: map[graph.Family]int{}, worst: map[graph.Family]float64{}}
			m, err := engine.LoadWith(c, graphs, weights.NewRandom(7), b)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewSource(1))
			if res := b.mem.Buffer("residency"); res != nil {
				// Half the experts not resident, so MoCE substitutes.
				for i := range backend.Uint32s(res) {
					backend.Uint32s(res)[i] = uint32(rng.Intn(2))
				}
			}
			tokens := make([]int, max(40, 2*c.Windows.PrefillRows))
			for i := range tokens {
				tokens[i] = rng.Intn(c.Architecture.VocabSize)
			}
			pre := c.Windows.PrefillRows
			// A full prefill window, one with fewer live rows than its shape,
			// decode rows, then speculative windows with MTP drafts.
			s := m.NewSession()
			if _, err := s.Generate(tokens[:pre+pre/2], 2, engine.GenerateOptions{PrefillRows: pre}); err != nil {
				t.Fatal(err)
			}
			s = m.NewSession()
			_, err = s.Generate(tokens[:pre+3], 6, engine.GenerateOptions{PrefillRows: pre,
				Spec: engine.SpecOptions{Depth: c.Windows.MaxDecodeRows - 1, MTP: true}})
			if err != nil {
				t.Fatal(err)
			}
			var fams []graph.Family
			for f := range b.compared {
				fams = append(fams, f)
				compared[f] += b.compared[f]
			}
			slices.Sort(fams)
			var report []string
			for _, f := range fams {
				report = append(report, fmt.Sprintf("%s %d (worst %.1e)", f, b.compared[f], b.worst[f]))
			}
			t.Logf("dispatches compared: %s", strings.Join(report, ", "))
		})
	}
	for _, f := range gen.Families() {
		if compared[f.Name] == 0 {
			t.Errorf("kernel family %s was never dispatched: the odd configs must cover every family", f.Name)
		}
	}
}

// oneDispatch is graph g cut down to its dispatches ds (no host points).
func oneDispatch(g *graph.Graph, ds ...graph.Dispatch) *graph.Graph {
	out := *g
	out.Dispatches, out.HostPoints, out.ICB = ds, nil, nil
	return &out
}

// randomize fills every buffer of the memories with the same random floats
// in [-1, 1).
func randomize(g *graph.Graph, seed int64, mems ...backend.Memory) {
	rng := rand.New(rand.NewSource(seed))
	for _, b := range g.Buffers {
		vals := make([]float32, b.Size/4)
		for i := range vals {
			vals[i] = rng.Float32()*2 - 1
		}
		for _, m := range mems {
			copy(backend.Float32s(m.Buffer(b.Name)), vals)
		}
	}
}

func setParams(g *graph.Graph, rows, pos int, mems ...backend.Memory) {
	for _, m := range mems {
		p := backend.Uint32s(m.Buffer("params"))
		p[0], p[1] = uint32(rows), uint32(pos)
	}
}

// TestMSLEmuIndexSelectPastCache: index_select keeps block scores in
// threadgroup memory up to select_cache blocks and recomputes them per
// radix pass beyond; no oracle is long enough to get there (4096 blocks), so
// both paths run here on random queries and pooled keys, some of them tied
// (the lower block wins), against the cpu backend.
func TestMSLEmuIndexSelectPastCache(t *testing.T) {
	e2e.RequireEmulator(t)
	c, err := models.Embedded("q4-a")
	if err != nil {
		t.Fatal(err)
	}
	c.Architecture.Indexer.CompressRatio, c.Architecture.Indexer.Budget = 1, 16
	c.Runtime.ContextLength = 4400
	g, err := gen.Window(c, 2, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var d graph.Dispatch
	for _, x := range g.Dispatches {
		if x.Family == "index_select" {
			d = x
		}
	}
	single := oneDispatch(g, d)
	am, err := gen.Kernels(c, []*graph.Graph{single})
	if err != nil {
		t.Fatal(err)
	}
	emu, err := mslemu.New(am, mslemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	for _, pos := range []int{300, 4094, 4200, 4398} {
		ref, err := backend.NewHostMemory(single)
		if err != nil {
			t.Fatal(err)
		}
		got, err := emu.NewMemory(single)
		if err != nil {
			t.Fatal(err)
		}
		randomize(single, int64(pos), ref, got)
		setParams(single, 2, pos, ref, got)
		pooled, _ := d.Arg("pooled")
		for _, m := range []backend.Memory{ref, got} {
			keys, _ := m.Bytes(pooled.Range)
			row := int64(c.Architecture.Indexer.HeadDim * 4)
			for _, dup := range []int64{7, 100, 2999, 4100} { // ties with block 3
				copy(keys[dup*row:(dup+1)*row], keys[3*row:4*row])
			}
		}
		for _, name := range []string{"sel", "count"} {
			a, _ := d.Arg(name)
			poison(ref, a, "uint")
			poison(got, a, "uint")
		}
		cp, err := cpu.Compile(single, ref)
		if err != nil {
			t.Fatal(err)
		}
		cp.Run()
		ep, err := emu.Compile(single, got)
		if err != nil {
			t.Fatal(err)
		}
		if err := ep.Run(); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"sel", "count"} {
			a, _ := d.Arg(name)
			w, _ := ref.Bytes(a.Range)
			v, _ := got.Bytes(a.Range)
			if !slices.Equal(backend.Uint32s(w), backend.Uint32s(v)) {
				t.Errorf("position %d: %s is %v, the cpu backend's %v", pos, name, backend.Uint32s(v), backend.Uint32s(w))
			}
		}
	}
}

// TestMSLEmuChunkedDispatch: a dispatch split into chunks along a grid axis
// (graph.Optimize does it past 2^25 threadgroups; none of our models gets
// there) computes what the whole dispatch does: each chunk reads its
// offset from the grid-offset function constants.
func TestMSLEmuChunkedDispatch(t *testing.T) {
	e2e.RequireEmulator(t)
	c, err := models.Embedded("tiny-a")
	if err != nil {
		t.Fatal(err)
	}
	g, err := gen.Window(c, 16, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var head graph.Dispatch // the last matmul, the head: grid (vocab/8, rows/8)
	for _, d := range g.Dispatches {
		if d.Family == graph.FamilyMatmul {
			head = d
		}
	}
	if head.Family != "matmul" || head.Grid[0] < 3 {
		t.Fatalf("the last matmul is %s with grid %v, expected the head", head.Kernel, head.Grid)
	}
	var chunks []graph.Dispatch
	for _, cut := range [][2]int{{0, 5}, {5, head.Grid[0] - 1}, {head.Grid[0] - 1, head.Grid[0]}} {
		d := head
		d.Grid[0] = cut[1] - cut[0]
		d.Consts = append(append([]graph.Const{}, head.Consts...), graph.Const{Name: graph.ConstGridOffsetX, Value: int64(cut[0])})
		chunks = append(chunks, d)
	}
	whole, split := oneDispatch(g, head), oneDispatch(g, chunks...)
	am, err := gen.Kernels(c, []*graph.Graph{split})
	if err != nil {
		t.Fatal(err)
	}
	emu, err := mslemu.New(am, mslemu.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer emu.Close()
	ref, err := backend.NewHostMemory(whole)
	if err != nil {
		t.Fatal(err)
	}
	got, err := emu.NewMemory(split)
	if err != nil {
		t.Fatal(err)
	}
	randomize(whole, 1, ref, got)
	setParams(whole, 16, 0, ref, got)
	y, _ := head.Arg("y")
	poison(ref, y, "float")
	poison(got, y, "float")
	cp, err := cpu.Compile(whole, ref)
	if err != nil {
		t.Fatal(err)
	}
	cp.Run()
	ep, err := emu.Compile(split, got)
	if err != nil {
		t.Fatal(err)
	}
	if err := ep.Run(); err != nil {
		t.Fatal(err)
	}
	w, _ := ref.Bytes(y.Range)
	v, _ := got.Bytes(y.Range)
	wf, vf := backend.Float32s(w), backend.Float32s(v)
	for i := range wf {
		if !(math.Abs(float64(vf[i]-wf[i])) <= 1e-4*math.Max(1, math.Abs(float64(wf[i])))) {
			t.Fatalf("logit %d: %g from the chunks, %g from the whole dispatch", i, vf[i], wf[i])
		}
	}
}
