package grammar

import (
	"bytes"
	"slices"
	"sync"
)

// Vocab is a tokenizer's vocabulary as byte tries, built once and shared by
// every Constraint over it (safe for concurrent use).
type Vocab struct {
	n     int      // ids: 0 … n-1
	bytes [][]byte // each id's bytes; nil for ids never allowed (special, empty)
	all   *trie

	mu    sync.Mutex
	loops map[loopKey]*loop // lexical fast paths, made on first use
}

// loopKey names a lexical state a token can stay inside: a string's body
// (kStr, no upper length bound) or text before a terminator (kUntil), with
// the element's lexical sub-state.
type loopKey struct {
	kind    kind
	sub     uint32
	term    string
	bounded bool // a string with an upper length bound: inside by length
}

// maxLoopChars is the most characters a token may add to a bounded string
// and still be in its fast path; longer ones are walked.
const maxLoopChars = 24

// loop is a fast path: the tokens that stay inside the lexical element
// (inside: allowed whatever follows it), and the trie of those that leave
// it (rest: walked). A token in neither is refused by the element itself.
type loop struct {
	inside []uint64
	rest   *trie
	// upTo[k], for a bounded string: the tokens that stay inside and
	// start at most k characters (a last one unfinished counts).
	upTo [][]uint64
}

// trie is a byte trie in preorder: node k has byte b[k] at depth d[k] (a
// child of the root at depth 0), its subtree ends before end[k], and tok[k]
// is the id ending there (-1: none; more ids with the same bytes in dup).
type trie struct {
	b        []byte
	d        []int32
	end      []int32
	tok      []int32
	dup      map[int32][]int32
	maxDepth int
}

// NewVocab indexes n token ids by their bytes. skip says which ids are
// never allowed by a grammar (special and control tokens; the EOS ids a
// Constraint allows at the end are given to it apart). Ids with no bytes
// are skipped too.
func NewVocab(n int, tokenBytes func(id int) []byte, skip func(id int) bool) *Vocab {
	v := &Vocab{n: n, bytes: make([][]byte, n), loops: map[loopKey]*loop{}}
	var ids []int32
	for id := range n {
		b := tokenBytes(id)
		if len(b) == 0 || skip != nil && skip(id) {
			continue
		}
		v.bytes[id] = b
		ids = append(ids, int32(id))
	}
	v.all = v.build(ids)
	return v
}

// Size is the number of ids the vocabulary covers.
func (v *Vocab) Size() int { return v.n }

// Bytes is the bytes of id as the grammar sees it (nil: never allowed).
func (v *Vocab) Bytes(id int) []byte {
	if id < 0 || id >= v.n {
		return nil
	}
	return v.bytes[id]
}

func words(n int) int { return (n + 63) / 64 }

func (v *Vocab) build(ids []int32) *trie {
	slices.SortFunc(ids, func(a, b int32) int {
		if c := bytes.Compare(v.bytes[a], v.bytes[b]); c != 0 {
			return c
		}
		return int(a - b)
	})
	t := &trie{dup: map[int32][]int32{}}
	var path []int32 // the node of each depth on the current path
	var prev []byte
	for _, id := range ids {
		b := v.bytes[id]
		if bytes.Equal(b, prev) && len(t.tok) > 0 {
			last := path[len(b)-1]
			t.dup[last] = append(t.dup[last], id)
			continue
		}
		lcp := 0
		for lcp < len(b) && lcp < len(prev) && b[lcp] == prev[lcp] {
			lcp++
		}
		// Close the nodes below the common prefix.
		for d := len(path) - 1; d >= lcp; d-- {
			t.end[path[d]] = int32(len(t.b))
		}
		path = path[:lcp]
		for d := lcp; d < len(b); d++ {
			path = append(path, int32(len(t.b)))
			t.b = append(t.b, b[d])
			t.d = append(t.d, int32(d))
			t.end = append(t.end, 0)
			t.tok = append(t.tok, -1)
		}
		t.tok[path[len(b)-1]] = id
		t.maxDepth = max(t.maxDepth, len(b))
		prev = b
	}
	for _, k := range path {
		t.end[k] = int32(len(t.b))
	}
	return t
}

// walk sets in mask the ids of t whose bytes the state s accepts, skipping
// every subtree whose prefix it refuses.
func (t *trie) walk(g *Grammar, s []*node, mask []uint64, scratch *[][]*node) {
	if len(t.b) == 0 {
		return
	}
	st := *scratch
	for len(st) < t.maxDepth+1 {
		st = append(st, make([]*node, 0, 8)) // one buffer per depth, reused by every walk
	}
	*scratch = st
	st[0] = s
	for k := 0; k < len(t.b); {
		d := t.d[k]
		next := g.advance(st[d], t.b[k], st[d+1][:0])
		st[d+1] = next
		if len(next) == 0 {
			k = int(t.end[k])
			continue
		}
		if id := t.tok[k]; id >= 0 {
			mask[id>>6] |= 1 << (id & 63)
			for _, x := range t.dup[int32(k)] {
				mask[x>>6] |= 1 << (x & 63)
			}
		}
		k++
	}
}

// loop returns the fast path of key, making it on first use: each token is
// run through the element alone from key's sub-state.
func (v *Vocab) loop(key loopKey) *loop {
	v.mu.Lock()
	defer v.mu.Unlock()
	if l, ok := v.loops[key]; ok {
		return l
	}
	var u until
	if key.kind == kUntil {
		u = newUntil(key.term)
	}
	l := &loop{inside: make([]uint64, words(v.n))}
	if key.bounded {
		l.upTo = make([][]uint64, maxLoopChars+1)
		for k := range l.upTo {
			l.upTo[k] = make([]uint64, words(v.n))
		}
	}
	var rest []int32
	for id, b := range v.bytes {
		if b == nil {
			continue
		}
		sub, inside, chars := key.sub, true, 0
		for _, c := range b {
			var closed, ok bool
			if key.kind == kStr {
				lex := sub & 15
				sub, closed, ok = strStep(strBounds{0, -1}, sub&15, c)
				if ok && !closed && lex == sClean {
					chars++ // a character starts
				}
			} else {
				sub, closed = u.step(sub, c)
				ok = true
			}
			if !ok || closed {
				inside = false
				if closed {
					rest = append(rest, int32(id))
				}
				break
			}
		}
		switch {
		case !inside:
		case !key.bounded:
			l.inside[id>>6] |= 1 << (id & 63)
		case chars > maxLoopChars:
			rest = append(rest, int32(id))
		default:
			for k := chars; k <= maxLoopChars; k++ {
				l.upTo[k][id>>6] |= 1 << (id & 63)
			}
		}
	}
	l.rest = v.build(rest)
	v.loops[key] = l
	return l
}
