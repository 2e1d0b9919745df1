// Package stream keeps the routed experts a window needs resident in a
// bounded arena, reading the rest from the SSD pack: the arena (a few large
// buffers cut into page-aligned slots, LRU), smap (the one table kernels
// consult: smap[layer·E + expert] = chunk << 28 | page, or Miss), a pool of
// reader threads with an urgent queue and a read-ahead queue, deterministic
// residency for cache-aware routing, and the usage history that seeds the
// arena across restarts. It knows nothing of Metal or of the model's math.
package stream

import (
	"fmt"
)

// PageSize is the granularity of smap addresses and of the pack.
const PageSize = 16 << 10

// Miss marks an smap entry whose expert is not resident.
const Miss = ^uint32(0)

// maxChunks bounds the arena buffers a kernel binds; 4 buffers also keep
// every page index below 2^28.
const maxChunks = 4

// slot is one expert-sized piece of the arena.
type slot struct {
	chunk, page int
	key         int // layer·E + expert held, or -1
	prev, next  int // LRU list (most recent at head)
	pins        int // uses that forbid eviction: the current layer, a read in flight
	loading     bool
	prefetched  bool // filled by a read-ahead no layer has used yet
}

// Arena is the residency state: which expert sits in which slot, in LRU
// order, and smap. It is not safe for concurrent use; the Streamer guards it.
type Arena struct {
	Layers, Experts int
	SlotBytes       int // bytes per slot: one expert rounded up to pages
	Chunks          [][]byte
	Smap            []uint32

	slots      []slot
	where      []int // key → slot, -1
	head, tail int   // LRU ends, -1 when empty
	free       []int
}

// NewArena cuts capacity slots of slotBytes (a multiple of PageSize) from at
// most 4 chunks allocated here, and starts with nothing resident.
func NewArena(layers, experts, slotBytes, capacity int) (*Arena, error) {
	if slotBytes <= 0 || slotBytes%PageSize != 0 {
		return nil, fmt.Errorf("arena slot of %d bytes: expected a positive multiple of %d", slotBytes, PageSize)
	}
	if capacity < 1 {
		return nil, fmt.Errorf("arena of %d slots: expected at least 1", capacity)
	}
	a := &Arena{Layers: layers, Experts: experts, SlotBytes: slotBytes, head: -1, tail: -1}
	perChunk := (capacity + maxChunks - 1) / maxChunks
	if perChunk*slotBytes/PageSize >= 1<<28 {
		return nil, fmt.Errorf("arena of %d slots of %d bytes: a chunk would pass 2^28 pages", capacity, slotBytes)
	}
	for left := capacity; left > 0; left -= perChunk {
		n := min(perChunk, left)
		a.Chunks = append(a.Chunks, pageAligned(n*slotBytes))
		c := len(a.Chunks) - 1
		for i := 0; i < n; i++ {
			a.slots = append(a.slots, slot{chunk: c, page: i * slotBytes / PageSize, key: -1, prev: -1, next: -1})
		}
	}
	for i := len(a.slots) - 1; i >= 0; i-- {
		a.free = append(a.free, i)
	}
	a.Smap = make([]uint32, layers*experts)
	a.where = make([]int, layers*experts)
	for i := range a.Smap {
		a.Smap[i], a.where[i] = Miss, -1
	}
	return a, nil
}

// NewArenaIn builds an arena over memory the caller owns: chunks (each a
// whole number of slots; at most 4) and smap (layers × experts entries, set
// to Miss here) — e.g. a backend's experts and smap buffers.
func NewArenaIn(layers, experts, slotBytes int, chunks [][]byte, smap []uint32) (*Arena, error) {
	if slotBytes <= 0 || slotBytes%PageSize != 0 {
		return nil, fmt.Errorf("arena slot of %d bytes: expected a positive multiple of %d", slotBytes, PageSize)
	}
	if len(chunks) == 0 || len(chunks) > maxChunks {
		return nil, fmt.Errorf("arena of %d chunks: expected 1 to %d", len(chunks), maxChunks)
	}
	if len(smap) < layers*experts {
		return nil, fmt.Errorf("smap of %d entries for %d layers × %d experts", len(smap), layers, experts)
	}
	a := &Arena{Layers: layers, Experts: experts, SlotBytes: slotBytes, Chunks: chunks, Smap: smap[:layers*experts], head: -1, tail: -1}
	for c, ch := range chunks {
		n := len(ch) / slotBytes
		if n*slotBytes/PageSize >= 1<<28 {
			return nil, fmt.Errorf("arena chunk %d of %d bytes passes 2^28 pages", c, len(ch))
		}
		for i := 0; i < n; i++ {
			a.slots = append(a.slots, slot{chunk: c, page: i * slotBytes / PageSize, key: -1, prev: -1, next: -1})
		}
	}
	if len(a.slots) == 0 {
		return nil, fmt.Errorf("arena chunks of %d bytes hold no slot of %d bytes", len(chunks[0]), slotBytes)
	}
	for i := len(a.slots) - 1; i >= 0; i-- {
		a.free = append(a.free, i)
	}
	a.where = make([]int, layers*experts)
	for i := range a.Smap {
		a.Smap[i], a.where[i] = Miss, -1
	}
	return a, nil
}

// pageAligned returns zeroed memory whose start is page-aligned (needed for
// O_DIRECT reads and zero-copy GPU buffers).
func pageAligned(n int) []byte {
	b := make([]byte, n+PageSize)
	off := 0
	if r := int(addrOf(b) % PageSize); r != 0 {
		off = PageSize - r
	}
	return b[off : off+n : off+n]
}

// Capacity is the number of slots.
func (a *Arena) Capacity() int { return len(a.slots) }

// Resident reports whether an expert's bytes are in the arena (not loading).
func (a *Arena) Resident(layer, expert int) bool {
	s := a.where[layer*a.Experts+expert]
	return s >= 0 && !a.slots[s].loading
}

// Bytes is the slot memory of a resident or loading expert.
func (a *Arena) Bytes(layer, expert int) []byte {
	s := a.where[layer*a.Experts+expert]
	if s < 0 {
		return nil
	}
	sl := a.slots[s]
	off := sl.page * PageSize
	return a.Chunks[sl.chunk][off : off+a.SlotBytes]
}

func (a *Arena) unlink(s int) {
	sl := &a.slots[s]
	if sl.prev >= 0 {
		a.slots[sl.prev].next = sl.next
	} else if a.head == s {
		a.head = sl.next
	}
	if sl.next >= 0 {
		a.slots[sl.next].prev = sl.prev
	} else if a.tail == s {
		a.tail = sl.prev
	}
	sl.prev, sl.next = -1, -1
}

func (a *Arena) pushFront(s int) {
	sl := &a.slots[s]
	sl.prev, sl.next = -1, a.head
	if a.head >= 0 {
		a.slots[a.head].prev = s
	}
	a.head = s
	if a.tail < 0 {
		a.tail = s
	}
}

// pushBack puts a slot at the least recently used end.
func (a *Arena) pushBack(s int) {
	sl := &a.slots[s]
	sl.prev, sl.next = a.tail, -1
	if a.tail >= 0 {
		a.slots[a.tail].next = s
	}
	a.tail = s
	if a.head < 0 {
		a.head = s
	}
}

// touch marks a slot most recently used.
func (a *Arena) touch(s int) {
	a.unlink(s)
	a.pushFront(s)
}

// claim finds a slot for key: a free one, else the least recently used one
// that is not pinned. It returns -1 when every slot is pinned.
func (a *Arena) claim(key int) int {
	s := -1
	if n := len(a.free); n > 0 {
		s = a.free[n-1]
		a.free = a.free[:n-1]
	} else {
		for c := a.tail; c >= 0; c = a.slots[c].prev {
			if a.slots[c].pins == 0 {
				s = c
				break
			}
		}
		if s < 0 {
			return -1
		}
		old := a.slots[s].key
		a.where[old], a.Smap[old] = -1, Miss
		a.unlink(s)
	}
	sl := &a.slots[s]
	sl.key, sl.loading, sl.prefetched = key, true, false
	a.where[key] = s
	a.pushFront(s)
	return s
}

// publish makes a loaded slot visible to kernels.
func (a *Arena) publish(s int) {
	sl := &a.slots[s]
	sl.loading = false
	a.Smap[sl.key] = uint32(sl.chunk)<<28 | uint32(sl.page)
}

// drop forgets a slot whose read failed: nothing corrupt stays resident.
func (a *Arena) drop(s int) {
	sl := &a.slots[s]
	a.where[sl.key], a.Smap[sl.key] = -1, Miss
	a.unlink(s)
	sl.key, sl.loading, sl.pins = -1, false, 0
	a.free = append(a.free, s)
}

// Order lists the resident keys (layer·E + expert) from most to least
// recently used: what the usage history saves.
func (a *Arena) Order() []int {
	var out []int
	for s := a.head; s >= 0; s = a.slots[s].next {
		if !a.slots[s].loading {
			out = append(out, a.slots[s].key)
		}
	}
	return out
}
