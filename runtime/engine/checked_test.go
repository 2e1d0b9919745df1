package engine_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/strata-llm/strata/gen"
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/cpu"
	"github.com/strata-llm/strata/runtime/engine"
	"github.com/strata-llm/strata/runtime/engine/stream"
	"github.com/strata-llm/strata/runtime/weights"
)

// checkedBackend is the cpu backend with programs that run checked
// (backend.CheckedProgram) the way a GPU does, as far as one thread can:
// at each host point the "GPU" copies the ids out and checks them against
// smap; where all are resident it runs on and the host's call is put off
// until the next point the GPU waits at (or the window's end), so the
// host runs behind the window as it does on a GPU.
type checkedBackend struct {
	claimResident bool // report every point resident (a broken check)
}

type checkedProgram struct {
	backend.HostProgram
	mem           backend.Memory
	g             *graph.Graph
	claimResident bool
}

func (checkedBackend) NewMemory(graphs ...*graph.Graph) (backend.Memory, error) {
	return cpu.Backend.NewMemory(graphs...)
}

func (b checkedBackend) Compile(g *graph.Graph, mem backend.Memory) (backend.Program, error) {
	p, err := cpu.Backend.Compile(g, mem)
	if err != nil {
		return nil, err
	}
	return &checkedProgram{HostProgram: p.(backend.HostProgram), mem: mem, g: g, claimResident: b.claimResident}, nil
}

func (p *checkedProgram) words(r graph.Range, n int) ([]uint32, error) {
	b, err := p.mem.Bytes(r)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(b[4*i:])
	}
	return out, nil
}

func (p *checkedProgram) RunChecked(checks []backend.HostCheck, host func(graph.HostPoint, backend.HostSeen) error) error {
	if len(checks) != len(p.g.HostPoints) {
		return fmt.Errorf("%d checks for %d host points", len(checks), len(p.g.HostPoints))
	}
	var behind []func() error
	catchUp := func() error {
		var errs []error
		for _, f := range behind {
			errs = append(errs, f())
		}
		behind = nil
		return errors.Join(errs...)
	}
	k := 0
	err := p.RunHost(func(hp graph.HostPoint) error {
		c := checks[k]
		k++
		rows := binary.LittleEndian.Uint32(p.mem.Buffer(graph.ParamsBuffer)[4*graph.ParamRowsWord:])
		n := min(int(rows), c.Rows) * c.PerRow
		ids, err := p.words(c.IDs, n)
		if err != nil {
			return err
		}
		seen := backend.HostSeen{IDs: ids, Resident: true}
		for _, r := range c.Reads {
			w, err := p.words(r, n)
			if err != nil {
				return err
			}
			seen.Reads = append(seen.Reads, w)
		}
		smap, err := p.words(c.Smap, int(c.Smap.Size/4))
		if err != nil {
			return err
		}
		for _, e := range ids {
			if int(e) >= len(smap) || smap[e] == c.Miss {
				seen.Resident = p.claimResident
			}
		}
		call := func() error { return host(hp, seen) }
		if seen.Resident {
			behind = append(behind, call) // the GPU runs on
			return nil
		}
		if err := catchUp(); err != nil {
			return err
		}
		return call()
	})
	return errors.Join(err, catchUp())
}

// checkedRun streams tiny-a through an arena of slots,
// checked, next to the resident model, window by window; it fails the
// test on a logit that differs and returns the streaming telemetry, the
// host points passed, and the first window's error.
func checkedRun(t *testing.T, slots int) (stream.Stats, int, error) {
	t.Helper()
	return checkedRunWith(t, slots, checkedBackend{}, false)
}

func checkedRunWith(t *testing.T, slots int, be checkedBackend, readAhead bool) (stream.Stats, int, error) {
	t.Helper()
	load := func(be backend.Backend, st *engine.Streaming) *engine.Model {
		c, graphs := tinyA(t)
		var err error
		if readAhead {
			c.Runtime.ReadAhead = true
			if graphs, err = gen.Windows(c, true); err != nil {
				t.Fatal(err)
			}
		}
		var m *engine.Model
		if st == nil {
			m, err = engine.LoadWith(c, graphs, weights.NewRandom(7), be)
		} else {
			m, err = engine.LoadStreaming(c, graphs, weights.NewRandom(7), be, *st)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m
	}
	full := load(cpu.Backend, nil)
	m := load(be, &engine.Streaming{Slots: slots})
	want, got := full.NewSession(), m.NewSession()
	// A prompt, then decode windows of 1 to 4 rows of scattered tokens
	// (churn enough that read-aheads evict).
	windows := [][]int{{1, 2, 3, 4, 5, 6}}
	x := 3
	for i := range 96 {
		var w []int
		for range 1 + i%4 {
			x = (x*1103515245 + 12345) & 0x7fffffff
			w = append(w, x%full.Config.Architecture.VocabSize)
		}
		windows = append(windows, w)
	}
	points := 0
	for w, tokens := range windows {
		a, err := want.Window(tokens)
		if err != nil {
			t.Fatal(err)
		}
		b, err := got.Window(tokens)
		if err != nil {
			return m.StreamStats(), points, fmt.Errorf("window %d: %w", w, err)
		}
		for i := range a {
			for j := range a[i] {
				if a[i][j] != b[i][j] {
					t.Fatalf("window %d row %d logit %d: %v checked and streamed, %v resident", w, i, j, b[i][j], a[i][j])
				}
			}
		}
		points += full.Config.Architecture.NumLayers
	}
	return m.StreamStats(), points, nil
}

// A checked run gives the resident model's logits bit for bit and runs past
// the points whose experts are all resident (and only those), the host
// catching up behind it; windows that read ahead are not run checked.
func TestCheckedHostPoints(t *testing.T) {
	for _, slots := range []int{24, 40, 56} { // of 4 layers × 16 experts, top-4
		st, points, err := checkedRun(t, slots)
		if err != nil {
			t.Fatalf("%d slots: %v", slots, err)
		}
		if st.RanOn+st.HostPoints != points || st.RanOn == 0 || st.HostPoints == 0 {
			t.Fatalf("%d slots, %d host points: the GPU waited at %d and ran past %d (want some of each, %d in all)", slots, points, st.HostPoints, st.RanOn, points)
		}
		t.Logf("%d slots, %d host points: waited at %d, ran past %d; %d misses", slots, points, st.HostPoints, st.RanOn, st.Misses)
	}
	// With read-ahead the host claims slots at points the GPU would run
	// past: those windows stop at every layer.
	st, points, err := checkedRunWith(t, 56, checkedBackend{}, true)
	if err != nil {
		t.Fatal(err)
	}
	if st.RanOn != 0 || st.HostPoints != points || st.Prefetched == 0 {
		t.Fatalf("read-ahead: %d host points, waited at %d, ran past %d, %d read-aheads (want every point waited at, some read-aheads)", points, st.HostPoints, st.RanOn, st.Prefetched)
	}
}

// Were the GPU to run past a layer whose experts the host then had to
// read (the residency changed under a running layer), the window fails
// rather than run on wrong weights. Here the "GPU" says every point is
// resident.
func TestCheckedHostPointsCatchAMissRunPast(t *testing.T) {
	_, _, err := checkedRunWith(t, 24, checkedBackend{claimResident: true}, false)
	if err == nil || !strings.Contains(err.Error(), "the residency changed under a running layer") {
		t.Fatalf("a point run past that missed: err %v", err)
	}
}
