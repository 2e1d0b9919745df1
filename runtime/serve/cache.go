package serve

import (
	"slices"

	"github.com/strata-llm/strata/runtime/engine"
)

// Saver is a Session whose state can be copied out and put back; with
// Options.CacheBytes > 0 the server keeps such copies of the conversations
// it switches away from.
type Saver interface {
	Save() (state any, bytes int64)
	Restore(state any)
}

// Marker is a Session that can remember its recurrent state at a position
// and return there later (the KV rows past it are overwritten as it goes on):
// the server marks each prompt's end, a turn boundary, so a next prompt that
// departs from the kept tokens after it (Qwen3's template drops the last
// reply's thinking) prefills only from there.
type Marker interface {
	Mark() any
	Rewind(mark any) error
}

// maxMarks bounds the turn-boundary marks kept (each holds one copy of the
// recurrent state).
const maxMarks = 4

type mark struct {
	pos int
	m   any
}

// EngineSession is an engine session as the server uses it, a Saver and a
// Marker.
func EngineSession(s *engine.Session) Session { return engineSession{s} }

type engineSession struct{ *engine.Session }

func (e engineSession) Save() (any, int64) {
	st := e.Session.Save(nil)
	return st, st.Bytes()
}

func (e engineSession) Restore(state any) { e.Session.Restore(state.(*engine.State)) }

func (e engineSession) Mark() any { return e.Session.Mark() }

func (e engineSession) Rewind(m any) error { return e.Session.Rewind(m.(*engine.Mark)) }

// stateCache holds saved session states by the tokens they consumed, least
// recently used evicted first to stay within the budget.
type stateCache struct {
	budget, total int64
	clock         uint64
	entries       []*savedState
}

type savedState struct {
	tokens []int
	state  any
	bytes  int64
	used   uint64
}

// put keeps a state (replacing one of the same tokens); one larger than the
// whole budget is not kept.
func (c *stateCache) put(tokens []int, state any, bytes int64) {
	if bytes > c.budget {
		return
	}
	c.entries = slices.DeleteFunc(c.entries, func(e *savedState) bool {
		if slices.Equal(e.tokens, tokens) {
			c.total -= e.bytes
			return true
		}
		return false
	})
	for c.total+bytes > c.budget && len(c.entries) > 0 {
		lru := 0
		for i, e := range c.entries {
			if e.used < c.entries[lru].used {
				lru = i
			}
		}
		c.total -= c.entries[lru].bytes
		c.entries = slices.Delete(c.entries, lru, lru+1)
	}
	c.clock++
	c.entries = append(c.entries, &savedState{tokens: slices.Clone(tokens), state: state, bytes: bytes, used: c.clock})
	c.total += bytes
}

// best is the kept state with the most tokens that prompt strictly extends.
func (c *stateCache) best(prompt []int) *savedState {
	var b *savedState
	for _, e := range c.entries {
		if len(e.tokens) < len(prompt) && (b == nil || len(e.tokens) > len(b.tokens)) && slices.Equal(prompt[:len(e.tokens)], e.tokens) {
			b = e
		}
	}
	if b != nil {
		c.clock++
		b.used = c.clock
	}
	return b
}

func (c *stateCache) has(tokens []int) bool {
	return slices.ContainsFunc(c.entries, func(e *savedState) bool { return slices.Equal(e.tokens, tokens) })
}
