package eval

import "github.com/strata-llm/strata/runtime/engine/stream"

// ArenaHits is how an expert arena did on a run's accesses, against an LRU
// cache and Belady's MIN of the same size on the same trace.
type ArenaHits struct {
	Arena    int // slots
	Accesses int // the trace's length
	// Hit is the arena's hit rate (a late read-ahead counts as a hit); LRU
	// and Belady the simulated caches'; Compulsory the bound no cache
	// beats, 1 − distinct experts / accesses.
	Hit, LRU, Belady, Compulsory float64
	MissesPerToken               float64
}

// Arena scores the streaming stats and access trace of a run that fed fed
// tokens through an arena of arena experts.
func Arena(ss stream.Stats, trace []int, arena, fed int) ArenaHits {
	n := float64(max(len(trace), 1))
	distinct := map[int]bool{}
	for _, k := range trace {
		distinct[k] = true
	}
	return ArenaHits{
		Arena: arena, Accesses: len(trace),
		Hit: float64(ss.Hits+ss.Late) / n, LRU: float64(stream.LRUHits(trace, arena)) / n,
		Belady: float64(stream.BeladyHits(trace, arena)) / n, Compulsory: 1 - float64(len(distinct))/n,
		MissesPerToken: float64(ss.Misses) / float64(fed),
	}
}
