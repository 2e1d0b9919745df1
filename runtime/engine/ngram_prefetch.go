package engine

import "time"

// PrefetchNgrams issues the reads of the n-gram table rows that tokens, fed
// next, will gather (the rows depend only on the tokens and the history
// before them): the prompt's rows before its first window, a decode window's
// right after its drafts are chosen. The window's own gather then finds
// them read.
func (s *Session) PrefetchNgrams(tokens []int) {
	for i, p := range s.m.ple {
		ids, _ := p.hash.RowIDs(s.history[i], tokens, s.m.eos)
		p.table.Prefetch(ids)
	}
}

// NgramRowsPrefetched is how many n-gram table rows PrefetchNgrams has read
// ahead so far, over every PLE layer.
func (m *Model) NgramRowsPrefetched() int64 {
	var n int64
	for _, p := range m.ple {
		n += p.table.Prefetched()
	}
	return n
}

// prefetchNgrams reads ahead the n-gram rows of tokens where the sequence is a
// model's session (test sequences have no n-gram table).
func prefetchNgrams(s sequence, tokens []int) {
	if p, ok := s.(interface{ PrefetchNgrams([]int) }); ok {
		p.PrefetchNgrams(tokens)
	}
}

// NgramGatherTime is the host's time gathering n-gram rows into windows'
// params before they run (hashing, and reading rows a read-ahead has not
// brought in), and how many windows gathered: the time a gather at a host
// point inside the window, overlapped with the layers before PLE, could
// hide at most.
func (m *Model) NgramGatherTime() (time.Duration, int64) {
	return time.Duration(m.ngramTime.Load()), m.ngramWindows.Load()
}
