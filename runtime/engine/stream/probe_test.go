package stream

import (
	"sync"
	"testing"
)

// countingReader records every read's expert and bytes.
type countingReader struct {
	mu    sync.Mutex
	bytes int
	seen  map[[2]int]int
}

func (c *countingReader) ReadExpert(layer, expert, off int, dst []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bytes += len(dst)
	c.seen[[2]int{layer, expert}] += len(dst)
	if addrOf(dst)%PageSize != 0 || off%PageSize != 0 {
		panic("unaligned probe read")
	}
	return nil
}

func TestProbeReadsWholeDistinctExperts(t *testing.T) {
	r := &countingReader{seen: map[[2]int]int{}}
	slot := 5 * PageSize
	p, err := ProbeReads(r, 3, 64, slot, 40, Options{Threads: 3, SplitBytes: 2 * PageSize})
	if err != nil {
		t.Fatal(err)
	}
	if p.Bytes != int64(40*slot) || r.bytes != 40*slot {
		t.Fatalf("probe counted %d bytes, read %d; want %d", p.Bytes, r.bytes, 40*slot)
	}
	if len(r.seen) != 40 {
		t.Fatalf("probe read %d distinct experts, want 40", len(r.seen))
	}
	for k, n := range r.seen {
		if n != slot || k[0] >= 3 || k[1] >= 64 {
			t.Fatalf("expert %v: %d bytes read", k, n)
		}
	}
	if _, err := ProbeReads(r, 0, 64, slot, 1, Options{}); err == nil {
		t.Fatal("a probe of no layers did not fail")
	}
}
