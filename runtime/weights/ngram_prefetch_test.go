package weights

import (
	"testing"

	"github.com/strata-llm/strata/models/quant"
)

// TestWaitPrefetches: once WaitPrefetches returns, every row a Prefetch asked
// for has been read, so the owner may unmap the table's file (before the
// wait, a model closed under a running prefetch faulted in cmd/strata's tests).
func TestWaitPrefetches(t *testing.T) {
	f, err := quant.Lookup("f32")
	if err != nil {
		t.Fatal(err)
	}
	const width, rows = 8, 64
	rl := quant.RowLayout{Format: f, Len: width, Stored: width}
	shard := make([]byte, rows*rl.RowBytes())
	tab, err := NewNgramTable("ple.table", width, rl, [][]byte{shard}, []string{"test"})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for i := 0; i < 50; i++ {
		tab.Prefetch([]int64{int64(i % rows), int64((i * 7) % rows), -1})
		want += 3
	}
	tab.WaitPrefetches()
	if got := tab.Prefetched(); got != want {
		t.Fatalf("after WaitPrefetches %d rows read of %d", got, want)
	}
}
