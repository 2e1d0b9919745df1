package stream

// Simulations for judging a cache policy on a recorded trace of expert
// accesses (keys in order): LRU with the arena's eviction rule, and Belady's
// optimal MIN, the hit rate no policy can beat with the same slots.

// LRUHits counts hits of an LRU cache of slots entries over trace.
func LRUHits(trace []int, slots int) int {
	last := map[int]int{} // key → time of last use
	hits := 0
	for t, k := range trace {
		if _, ok := last[k]; ok {
			hits++
		} else if len(last) >= slots {
			victim, oldest := -1, t
			for key, when := range last {
				if when < oldest || (when == oldest && key < victim) {
					victim, oldest = key, when
				}
			}
			delete(last, victim)
		}
		last[k] = t
	}
	return hits
}

// BeladyHits counts hits of Belady's MIN: on a miss with a full cache, evict
// the entry whose next use is farthest away (or never).
func BeladyHits(trace []int, slots int) int {
	next := make([]int, len(trace)) // next use of the same key after t
	seenAt := map[int]int{}
	for t := len(trace) - 1; t >= 0; t-- {
		if n, ok := seenAt[trace[t]]; ok {
			next[t] = n
		} else {
			next[t] = len(trace)
		}
		seenAt[trace[t]] = t
	}
	cache := map[int]int{} // key → its next use
	hits := 0
	for t, k := range trace {
		if _, ok := cache[k]; ok {
			hits++
		} else if len(cache) >= slots {
			victim, far := -1, -1
			for key, n := range cache {
				if n > far || (n == far && key < victim) {
					victim, far = key, n
				}
			}
			delete(cache, victim)
		}
		cache[k] = next[t]
	}
	return hits
}
