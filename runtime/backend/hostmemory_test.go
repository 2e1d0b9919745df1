package backend

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/strata-llm/strata/graph"
)

// HostMemory is the host side of every backend's memory.
var _ MappedMemory = (*HostMemory)(nil)

// The streaming arena lives in the experts buffer; O_DIRECT reads into it
// need a page-aligned start, and every other buffer needs 8 bytes.
func TestBufferAlignment(t *testing.T) {
	g := &graph.Graph{Buffers: []graph.Buffer{
		{Name: "x", Kind: graph.KindScratch, Size: 12},
		{Name: "experts", Kind: graph.KindExperts, Size: 3 * graph.ExpertPage},
		{Name: "params", Kind: graph.KindParams, Size: 4},
	}}
	for range 8 { // different heap positions
		m, err := NewHostMemory(g)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range g.Buffers {
			buf := m.Buffer(b.Name)
			want := 8
			if b.Kind == graph.KindExperts {
				want = graph.ExpertPage
			}
			if int64(len(buf)) != b.Size || cap(buf) != len(buf) {
				t.Fatalf("%s: len %d cap %d, want %d", b.Name, len(buf), cap(buf), b.Size)
			}
			if a := uintptr(unsafe.Pointer(&buf[0])); a%uintptr(want) != 0 {
				t.Fatalf("%s at %#x: not %d-aligned", b.Name, a, want)
			}
			for i, v := range buf {
				if v != 0 {
					t.Fatalf("%s[%d] = %d, want zeroed memory", b.Name, i, v)
				}
			}
		}
	}
	for _, n := range []int64{1, 7, 4096, 16<<10 + 1} {
		for _, align := range []int{8, 4096, 16 << 10} {
			b := AlignedBytes(n, align)
			if int64(len(b)) != n || uintptr(unsafe.Pointer(&b[0]))%uintptr(align) != 0 {
				t.Errorf("AlignedBytes(%d, %d): %d bytes at %p", n, align, len(b), &b[0])
			}
		}
	}
}

func TestLayout(t *testing.T) {
	t1 := &graph.Graph{Buffers: []graph.Buffer{
		{Name: "weights", Kind: graph.KindWeights, Size: 64},
		{Name: "x", Kind: graph.KindScratch, Size: 16},
		{Name: "params", Kind: graph.KindParams, Size: 8},
	}}
	t16 := &graph.Graph{Buffers: []graph.Buffer{
		{Name: "x", Kind: graph.KindScratch, Size: 256},
		{Name: "weights", Kind: graph.KindWeights, Size: 64},
		{Name: "kv", Kind: graph.KindCache, Size: 32},
	}}
	got, err := Layout(t1, t16)
	if err != nil {
		t.Fatal(err)
	}
	// Declaration order across the graphs; scratch at its largest.
	want := []graph.Buffer{
		{Name: "weights", Kind: graph.KindWeights, Size: 64},
		{Name: "x", Kind: graph.KindScratch, Size: 256},
		{Name: "params", Kind: graph.KindParams, Size: 8},
		{Name: "kv", Kind: graph.KindCache, Size: 32},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Layout = %v, want %v", got, want)
	}
	if t1.Buffers[1].Size != 16 {
		t.Fatal("Layout changed a graph's buffers")
	}

	// Buffers that outlive a window must have one size in every shape.
	for _, kind := range []string{graph.KindWeights, graph.KindExperts, graph.KindState, graph.KindCache, graph.KindMapped} {
		a := &graph.Graph{Buffers: []graph.Buffer{{Name: "b", Kind: kind, Size: 8}}}
		b := &graph.Graph{Buffers: []graph.Buffer{{Name: "b", Kind: kind, Size: 16}}}
		if _, err := Layout(a, b); err == nil || !strings.Contains(err.Error(), "do not share a layout") {
			t.Errorf("%s buffer of 8 and 16 bytes: err %v, want a layout error", kind, err)
		}
	}
	a := &graph.Graph{Buffers: []graph.Buffer{{Name: "b", Kind: graph.KindScratch, Size: 8}}}
	b := &graph.Graph{Buffers: []graph.Buffer{{Name: "b", Kind: graph.KindState, Size: 8}}}
	if _, err := Layout(a, b); err == nil || !strings.Contains(err.Error(), "scratch in one graph and state") {
		t.Errorf("buffer of two kinds: err %v", err)
	}
}

// WrapHostMemory takes a backend's bytes only as Layout and Align describe them.
func TestNewChecksHostBytes(t *testing.T) {
	layout := []graph.Buffer{
		{Name: "experts", Kind: graph.KindExperts, Size: graph.ExpertPage},
		{Name: "x", Kind: graph.KindScratch, Size: 16},
		{Name: "weights.file0", Kind: graph.KindMapped, Size: 32},
	}
	good := func() [][]byte {
		return [][]byte{AlignedBytes(graph.ExpertPage, graph.ExpertPage), AlignedBytes(16, 8), nil}
	}
	if _, err := WrapHostMemory(layout, good()); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		edit func([][]byte) [][]byte
		want string
	}{
		"experts off a page": {func(h [][]byte) [][]byte {
			h[0] = AlignedBytes(2*graph.ExpertPage, graph.ExpertPage)[8 : 8+graph.ExpertPage]
			return h
		}, "not on a 16384-byte boundary"},
		"short buffer":        {func(h [][]byte) [][]byte { h[1] = h[1][:8]; return h }, "8 bytes of host memory for a 16-byte buffer"},
		"mapped backed early": {func(h [][]byte) [][]byte { h[2] = AlignedBytes(32, 8); return h }, "backed before Wrap"},
		"slice count":         {func(h [][]byte) [][]byte { return h[:2] }, "2 host slices for 3 buffers"},
		"scratch off 8 bytes": {func(h [][]byte) [][]byte { h[1] = AlignedBytes(24, 8)[4:20]; return h }, "not on a 8-byte boundary"},
	} {
		if _, err := WrapHostMemory(layout, tc.edit(good())); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", name, err, tc.want)
		}
	}
}

func TestWrapAndReads(t *testing.T) {
	g := &graph.Graph{Buffers: []graph.Buffer{
		{Name: "state", Kind: graph.KindState, Size: 8},
		{Name: "weights.file0", Kind: graph.KindMapped, Size: 16},
	}}
	m, err := NewHostMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Bytes(graph.Range{Buffer: "weights.file0", Size: 4}); err == nil || !strings.Contains(err.Error(), "no host memory") {
		t.Fatalf("reading a mapped buffer before Wrap: err %v", err)
	}
	// A binding is checked against the layout, host memory or not.
	if i, err := m.Locate(graph.Range{Buffer: "weights.file0", Offset: 12, Size: 4}); err != nil || i != 1 {
		t.Errorf("Locate [12,16) of the 16-byte mapped buffer = %d, %v; want 1", i, err)
	}
	for _, r := range []graph.Range{{Buffer: "state", Offset: -4, Size: 4}, {Buffer: "state", Offset: 4, Size: 5}, {Buffer: "x", Size: 1}} {
		if _, err := m.Locate(r); err == nil {
			t.Errorf("Locate %+v: no error", r)
		}
	}
	file := AlignedBytes(32, 8)
	for i := range file {
		file[i] = byte(i)
	}
	if err := m.Wrap("state", file); err == nil || !strings.Contains(err.Error(), "only mapped buffers") {
		t.Errorf("wrapping state: err %v", err)
	}
	if err := m.Wrap("weights.file0", file[:8]); err == nil || !strings.Contains(err.Error(), "8 bytes of host memory for a 16-byte buffer") {
		t.Errorf("wrapping too little: err %v", err)
	}
	refused := errors.New("device refuses")
	if err := m.WrapWith("weights.file0", file, func(int, []byte) error { return refused }); !errors.Is(err, refused) {
		t.Errorf("WrapWith: err %v, want the bind error", err)
	}
	if m.Buffer("weights.file0") != nil {
		t.Fatal("a refused bind changed the buffer")
	}
	var bound int
	if err := m.WrapWith("weights.file0", file, func(i int, host []byte) error { bound = i; return nil }); err != nil {
		t.Fatal(err)
	}
	if bound != 1 {
		t.Errorf("bind got buffer %d, want 1 (its place in Layout)", bound)
	}
	b, err := m.Bytes(graph.Range{Buffer: "weights.file0", Offset: 4, Size: 4})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(b, []byte{4, 5, 6, 7}) || cap(b) != 4 {
		t.Errorf("Bytes [4,8) = %v (cap %d), want the file's bytes 4..7, capacity clipped", b, cap(b))
	}
	if whole, _ := m.Bytes(graph.Range{Buffer: "weights.file0"}); len(whole) != 16 {
		t.Errorf("the empty range at 0 is %d bytes, want the whole 16-byte buffer", len(whole))
	}
	if _, err := m.Bytes(graph.Range{Buffer: "state", Offset: 4, Size: 8}); err == nil || !strings.Contains(err.Error(), "outside buffer") {
		t.Errorf("range past the end: err %v", err)
	}

	copy(m.Buffer("state"), []byte{1, 2, 3, 4, 5, 6, 7, 8})
	snap := m.Snapshot(graph.KindState, nil)
	m.Clear(graph.KindState)
	if !slices.Equal(m.Buffer("state"), make([]byte, 8)) {
		t.Fatalf("Clear left %v", m.Buffer("state"))
	}
	m.Restore(snap)
	if !slices.Equal(m.Buffer("state"), []byte{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("Restore gave %v", m.Buffer("state"))
	}
	if _, ok := snap["weights.file0"]; ok {
		t.Error("a state snapshot holds a mapped buffer")
	}

	m.Drop()
	if !m.Dropped() || m.Buffer("state") != nil {
		t.Fatal("Drop kept a buffer")
	}
	if _, err := m.Bytes(graph.Range{Buffer: "state", Size: 4}); err == nil {
		t.Error("a dropped memory answered a read")
	}
}

// A fork shares every buffer but the forked kinds, which are its own and
// zeroed; a mapped buffer cannot be forked, and an allocation that breaks
// the layout is refused.
func TestFork(t *testing.T) {
	g := &graph.Graph{Buffers: []graph.Buffer{
		{Name: "w", Kind: graph.KindWeights, Size: 16},
		{Name: "kv", Kind: graph.KindCache, Size: 24},
		{Name: "gdn", Kind: graph.KindState, Size: 8},
		{Name: "file", Kind: graph.KindMapped, Size: 8},
	}}
	m, err := NewHostMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"w", "kv", "gdn"} {
		m.Buffer(n)[0] = 7
	}
	alloc := func(b graph.Buffer) ([]byte, error) { return AlignedBytes(b.Size, Align(b.Kind)), nil }
	f, err := m.Fork([]string{graph.KindState, graph.KindCache}, alloc)
	if err != nil {
		t.Fatal(err)
	}
	if &f.Buffer("w")[0] != &m.Buffer("w")[0] {
		t.Fatal("the fork's weights are not the base's bytes")
	}
	for _, n := range []string{"kv", "gdn"} {
		if &f.Buffer(n)[0] == &m.Buffer(n)[0] || f.Buffer(n)[0] != 0 || len(f.Buffer(n)) != len(m.Buffer(n)) {
			t.Fatalf("%s: the fork's buffer is not its own zeroed copy of the layout", n)
		}
	}
	if _, err := m.Fork([]string{graph.KindMapped}, alloc); err == nil || !strings.Contains(err.Error(), "mapped buffer file") {
		t.Fatalf("forking a mapped buffer: %v", err)
	}
	short := func(b graph.Buffer) ([]byte, error) { return AlignedBytes(b.Size-1, 8), nil }
	if _, err := m.Fork([]string{graph.KindState}, short); err == nil || !strings.Contains(err.Error(), "gdn") {
		t.Fatalf("a short allocation: %v", err)
	}
}
