package weights

import (
	"sync"
	"sync/atomic"
)

// Prefetch starts reading the rows ids in the background, so that the
// Gather that needs them later finds them in memory (the table lies in a
// mapped file: a row not yet read is a page fault on the SSD). Row ids are a
// function of the tokens alone, so they are known before the window that
// gathers them. Ids out of range are left to Gather to report.
func (t *NgramTable) Prefetch(ids []int64) {
	if t.fill != nil || len(ids) == 0 {
		return // generated rows: nothing to read
	}
	ids = append([]int64(nil), ids...)
	t.inflight.Add(1)
	go func() {
		defer t.inflight.Done()
		rb := t.layout.RowBytes()
		var sink byte
		for _, id := range ids {
			if id < 0 || id >= int64(t.rows) {
				continue
			}
			k, r := int(id)/t.rowsPer, int(id)%t.rowsPer
			row := t.shards[k][r*rb : (r+1)*rb]
			for off := 0; off < len(row); off += 4096 {
				sink ^= row[off] // one read per page faults it in
			}
			sink ^= row[len(row)-1]
		}
		t.prefetchSink.Store(uint32(sink))
		t.prefetched.Add(int64(len(ids)))
	}()
}

// WaitPrefetches returns once every Prefetch started so far has finished:
// the table's owner calls it before unmapping the file the rows lie in (a
// read after the unmap is a fault, not an error).
func (t *NgramTable) WaitPrefetches() { t.inflight.Wait() }

// Prefetched is how many rows Prefetch has read so far.
func (t *NgramTable) Prefetched() int64 { return t.prefetched.Load() }

// prefetchState is NgramTable's prefetch bookkeeping.
type prefetchState struct {
	prefetched   atomic.Int64
	prefetchSink atomic.Uint32 // keeps the reads from being optimised away
	inflight     sync.WaitGroup
}
