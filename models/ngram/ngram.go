// Package ngram is the hashed n-gram store of qwen4_exp's PLE layers: the
// per-head prime table sizes and offsets, the hash multipliers, and the row
// ids of a window's tokens (a pure function of the tokens, so the host knows
// them before the window runs). Formulas: ../shared/specs/qwen4_exp.md §3.1.
package ngram

import "fmt"

// Params are the config values the store depends on.
type Params struct {
	VocabSize     int // the model's vocabulary (bounds token ids)
	NgramSize     int // highest n-gram order (orders 2 … NgramSize)
	HeadsPerNgram int
	Base          int // ngram_vocab_size_base: primes start above it
	DivisibleBy   int // table rows are padded to a multiple of this
	Seed          int
	Ordinal       int // ℓ: which PLE layer (0-based among the PLE layers)
}

// Heads is the number of hashed heads.
func (p Params) Heads() int { return (p.NgramSize - 1) * p.HeadsPerNgram }

// Table is one PLE layer's store geometry and hash.
type Table struct {
	Params
	Primes      []int64 // P_j: rows of head j
	Offsets     []int64 // first row of head j
	Rows        int64   // Σ P_j padded to a multiple of DivisibleBy
	Multipliers []int64 // M_i, i < NgramSize
}

// New computes the table of p, as HF 5.17.0 does.
func New(p Params) (*Table, error) {
	if p.NgramSize < 2 || p.HeadsPerNgram < 1 || p.Base < 2 || p.DivisibleBy < 1 || p.VocabSize < 1 || p.Ordinal < 0 {
		return nil, fmt.Errorf("n-gram store: invalid parameters %+v", p)
	}
	t := &Table{Params: p}
	heads := p.Heads()
	// Head j of layer ℓ takes the (ℓ·heads + j + 1)-th prime above base−1.
	n := int64(p.Base - 1)
	for i := 0; i < p.Ordinal*heads; i++ {
		n = nextPrime(n)
	}
	var sum int64
	for j := 0; j < heads; j++ {
		n = nextPrime(n)
		t.Primes = append(t.Primes, n)
		t.Offsets = append(t.Offsets, sum)
		sum += n
	}
	d := int64(p.DivisibleBy)
	t.Rows = (sum + d - 1) / d * d
	t.Multipliers = multipliers(p)
	return t, nil
}

// nextPrime is the smallest prime > n, by trial division (the primes are
// around 2·10⁷, so this is cheap).
func nextPrime(n int64) int64 {
	for {
		n++
		if IsPrime(n) {
			return n
		}
	}
}

// IsPrime reports whether n is prime, by trial division.
func IsPrime(n int64) bool {
	if n < 2 {
		return false
	}
	if n%2 == 0 {
		return n == 2
	}
	for d := int64(3); d*d <= n; d += 2 {
		if n%d == 0 {
			return false
		}
	}
	return true
}

const golden = 0x9E3779B97F4A7C15

func splitmix64(v uint64) uint64 {
	z := v + golden
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
	z = (z ^ (z >> 27)) * 0x94D049BB133111EB
	return z ^ (z >> 31)
}

// Multipliers are the hash multipliers of p (Table.Multipliers) without the
// primes' search: cheap enough to try many seeds (a GGUF stores the
// multipliers, not the seed that made them).
func Multipliers(p Params) []int64 { return multipliers(p) }

// multipliers are odd numbers below 2·half, half = ⌊(2⁶³−1)/V⌋/2, so that
// token·M never overflows int64.
func multipliers(p Params) []int64 {
	half := uint64((1<<63-1)/int64(p.VocabSize)) / 2
	half = max(half, 1)
	base := uint64(p.Seed + 10007*p.Ordinal)
	out := make([]int64, p.NgramSize)
	for i := range out {
		out[i] = int64(2*(splitmix64(base+golden*uint64(i+1))%half) + 1)
	}
	return out
}

// History is the store's context across windows: the last NgramSize−1 token
// ids (EOS on a fresh sequence).
type History []int

// Fresh is the history of a new sequence.
func (t *Table) Fresh(eos int) History {
	h := make(History, t.NgramSize-1)
	for i := range h {
		h[i] = eos
	}
	return h
}

// RowIDs returns, for every token, the table row of each head (len(tokens) ×
// Heads, row-major), and the history after the tokens. An n-gram never
// reaches back across an EOS: a context token at or before the last EOS
// strictly before the current position reads as EOS.
func (t *Table) RowIDs(h History, tokens []int, eos int) ([]int64, History) {
	seq := append(append([]int(nil), h...), tokens...)
	heads := t.Heads()
	out := make([]int64, 0, len(tokens)*heads)
	ctx := make([]int64, t.NgramSize)
	for q := len(h); q < len(seq); q++ {
		ctx[0] = int64(seq[q])
		cut := false // an EOS seen walking back from q−1 cuts the rest
		for s := 1; s < t.NgramSize; s++ {
			if q-s < 0 || cut || seq[q-s] == eos {
				cut = true
				ctx[s] = int64(eos)
				continue
			}
			ctx[s] = int64(seq[q-s])
		}
		key := ctx[0] * t.Multipliers[0]
		for order := 2; order <= t.NgramSize; order++ {
			key ^= ctx[order-1] * t.Multipliers[order-1]
			for k := 0; k < t.HeadsPerNgram; k++ {
				j := (order-2)*t.HeadsPerNgram + k
				out = append(out, t.Offsets[j]+key%t.Primes[j])
			}
		}
	}
	return out, append(History(nil), seq[len(seq)-len(h):]...)
}
