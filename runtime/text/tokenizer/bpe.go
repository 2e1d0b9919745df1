package tokenizer

// merge is one BPE merge rule: the pair's rank (lower merges first) and the
// token it makes.
type merge struct {
	rank int32
	id   int32
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// smallWord is the length up to which a plain scan for the best pair beats the
// heap (words are mostly a few bytes long).
var smallWord = 48

// bpe merges syms (the byte tokens of one pre-tokenized word) in place by rank
// and returns the result. Ties go to the leftmost pair, as in HF tokenizers.
func (t *Tokenizer) bpe(syms []int32) []int32 {
	if len(syms) <= smallWord {
		return t.bpeScan(syms)
	}
	return t.bpeHeap(syms)
}

func (t *Tokenizer) bpeScan(syms []int32) []int32 {
	for len(syms) > 1 {
		best, bestRank, bestID := -1, int32(1<<31-1), int32(0)
		for i := 0; i+1 < len(syms); i++ {
			if m, ok := t.merges[pairKey(syms[i], syms[i+1])]; ok && m.rank < bestRank {
				best, bestRank, bestID = i, m.rank, m.id
			}
		}
		if best < 0 {
			break
		}
		syms[best] = bestID
		syms = append(syms[:best+1], syms[best+2:]...)
	}
	return syms
}

// bpeHeap is the O(n log n) merge for long words (a 1 MB line of letters, a long
// run of spaces): a doubly linked list of symbols and a min-heap of candidate
// pairs keyed rank<<32 | position. A rank names exactly one pair, so a popped
// candidate is stale exactly when the pair now at its position has another rank.
func (t *Tokenizer) bpeHeap(syms []int32) []int32 {
	n := len(syms)
	prev := make([]int32, n)
	next := make([]int32, n)
	for i := range syms {
		prev[i], next[i] = int32(i-1), int32(i+1)
	}
	next[n-1] = -1
	h := pairHeap(make([]uint64, 0, n))
	for i := int32(0); i+1 < int32(n); i++ {
		if m, ok := t.merges[pairKey(syms[i], syms[i+1])]; ok {
			h = append(h, candKey(m.rank, i))
		}
	}
	h.init()
	for len(h) > 0 {
		c := h.pop()
		rank, pos := int32(c>>32), int32(uint32(c))
		j := next[pos]
		if syms[pos] < 0 || j < 0 {
			continue
		}
		m, ok := t.merges[pairKey(syms[pos], syms[j])]
		if !ok || m.rank != rank {
			continue // stale: one side was merged away
		}
		syms[pos] = m.id
		syms[j] = -1
		next[pos] = next[j]
		if next[j] >= 0 {
			prev[next[j]] = pos
		}
		if p := prev[pos]; p >= 0 {
			t.pushPair(&h, syms, next, p)
		}
		t.pushPair(&h, syms, next, pos)
	}
	out := syms[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, syms[i])
	}
	return out
}

func candKey(rank, pos int32) uint64 { return uint64(uint32(rank))<<32 | uint64(uint32(pos)) }

func (t *Tokenizer) pushPair(h *pairHeap, syms, next []int32, i int32) {
	if j := next[i]; j >= 0 {
		if m, ok := t.merges[pairKey(syms[i], syms[j])]; ok {
			h.push(candKey(m.rank, i))
		}
	}
}

// pairHeap is a 4-ary min-heap of candidate keys: half the depth of a binary
// heap, and a node's children share a cache line.
type pairHeap []uint64

func (h pairHeap) init() {
	for i := (len(h) - 2) / 4; i >= 0; i-- {
		h.down(i)
	}
}

func (h *pairHeap) push(c uint64) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		p := (i - 1) / 4
		if s[i] >= s[p] {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *pairHeap) pop() uint64 {
	s := *h
	top := s[0]
	s[0] = s[len(s)-1]
	*h = s[:len(s)-1]
	h.down(0)
	return top
}

func (h pairHeap) down(i int) {
	for {
		first := 4*i + 1
		if first >= len(h) {
			return
		}
		m := first
		for c := first + 1; c < min(first+4, len(h)); c++ {
			if h[c] < h[m] {
				m = c
			}
		}
		if h[m] >= h[i] {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
