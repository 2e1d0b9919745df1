package buffers

import (
	"testing"
	"unsafe"

	"github.com/strata-llm/strata/graph"
)

// The streaming arena lives in the experts buffer; O_DIRECT reads into it
// need a page-aligned start, and every other buffer needs 8 bytes.
func TestBufferAlignment(t *testing.T) {
	g := &graph.Graph{Buffers: []graph.Buffer{
		{Name: "x", Kind: graph.KindScratch, Size: 12},
		{Name: "experts", Kind: graph.KindExperts, Size: 3 * graph.ExpertPage},
		{Name: "params", Kind: graph.KindParams, Size: 4},
	}}
	for range 8 { // different heap positions
		m, err := NewMemory(g)
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
