package cpu

import (
	"math"
	"sync"
)

// attnKeyBlock is how many cache rows attention takes at a time for all
// the query vectors of a tile: 64 rows of a 256-wide head are 64 KiB of
// keys (then as much of values), which stay in the core's L2 while the
// tile's queries pass over them three at a time.
const attnKeyBlock = 64

// attnPad: a block's value rows are copied at a stride of hd+attnPad
// floats before the value sums, so the kernel walks them down a column
// through consecutive cache sets (the cache's own stride, a power of two,
// puts a block's rows of one column in two L1 sets).
const attnPad = 16

// attnTileQueries is how many query vectors a prefill tile aims at: rows
// of the window times the query heads of a KV head (8 × 8 in Qwen3-Next),
// so each cache row read from memory serves that many queries.
const attnTileQueries = 64

// attnTileScores caps a tile's scores (queries × keys, float64): 8 MiB a
// thread, 8 rows of Qwen3-Next's 8 heads up to 16384 keys, 2 at 65536.
const attnTileScores = 1 << 20

// attnScratch is a thread's memory for attention's tiles: the tile's
// queries in float64 and its outputs (acc), the cache rows it sees and
// where each row's keys end, scores for every query and key, a block of
// value rows, the softmax sums. A pool keeps them between windows.
type attnScratch struct {
	qd, acc, scores, z []float64
	keys, nv           []int
	pack               []float32
}

var attnScratchPool = sync.Pool{New: func() any { return new(attnScratch) }}

// getAttnScratch is a scratch for tiles of rows × queries/rows query vectors
// over up to keys cache rows (put it back with attnScratchPool.Put).
func getAttnScratch(rows, queries, keys, hd int) *attnScratch {
	s := attnScratchPool.Get().(*attnScratch)
	grow := func(v []float64, n int) []float64 {
		if cap(v) < n {
			return make([]float64, n)
		}
		return v[:n]
	}
	s.qd, s.acc, s.scores, s.z = grow(s.qd, queries*hd), grow(s.acc, queries*hd), grow(s.scores, queries*keys), grow(s.z, queries)
	if cap(s.keys) < keys {
		s.keys = make([]int, 0, keys)
	}
	if cap(s.nv) < rows {
		s.nv = make([]int, rows)
	}
	s.nv = s.nv[:rows]
	if n := attnKeyBlock * (hd + attnPad); cap(s.pack) < n {
		s.pack = make([]float32, n)
	}
	return s
}

// attnTile is causal softmax attention for rows × heads query vectors that
// share one KV head: q and out hold them row-major ((r·heads+g)·hd), row r
// sees the cache rows keys[:nv[r]] (keys ascending, nv non-decreasing, at
// least 1), key s's row at kc[s·stride:][:hd] and vc[s·stride:][:hd]; s
// is big enough for the tile (getAttnScratch).
//
// Two passes, as the softmax is exact: every q·k, then per query e^(s−max)
// and their sum (in four partial sums), then the values weighted by the
// numerators, divided by the sum at the end. Every q·k has attnQKGo's
// order of additions and every output element sums its keys in order, one
// FMA each, so a row's result does not depend on the tile it is in (one
// row, or any number): decode, prefill windows of any size and the tiles
// agree to the bit.
func attnTile(out, q []float64, rows, heads, hd int, keys, nv []int, kc, vc []float32, stride int, scale float64, s *attnScratch) {
	scores, pack, zs := s.scores, s.pack, s.z
	nq, nk := rows*heads, nv[rows-1]
	scores = scores[:nq*nk]
	// runs calls f for the runs of consecutive cache rows in keys[b0:b1].
	runs := func(b0, b1 int, f func(k, run int)) {
		for k := b0; k < b1; {
			run := 1
			for k+run < b1 && keys[k+run] == keys[k]+run {
				run++
			}
			f(k, run)
			k += run
		}
	}
	// q·k for every query and every key any row sees, block by block of
	// keys (the keys past a row's own are computed and not used).
	for b0 := 0; b0 < nk; b0 += attnKeyBlock {
		runs(b0, min(b0+attnKeyBlock, nk), func(k, run int) {
			attnQK(q, hd, kc[keys[k]*stride:], stride, scores[k:], nk, nq, run, hd)
		})
	}
	// The softmax's numerators e^(s−max) and their sums.
	for qi := range nq {
		sc := scores[qi*nk : qi*nk+nv[qi/heads]]
		mx := math.Inf(-1)
		for k, v := range sc {
			v *= scale
			sc[k] = v
			if v > mx || v != v { // a NaN stays
				mx = v
			}
		}
		expShift(sc, mx)
		var z [4]float64
		k := 0
		for ; k+4 <= len(sc); k += 4 {
			z[0] += sc[k]
			z[1] += sc[k+1]
			z[2] += sc[k+2]
			z[3] += sc[k+3]
		}
		for ; k < len(sc); k++ {
			z[k&3] += sc[k]
		}
		zs[qi] = (z[0] + z[2]) + (z[1] + z[3])
	}
	// The weighted values: the keys every row sees, block by block, then
	// each key of the diagonal for the rows that see it.
	out = out[:nq*hd]
	clear(out)
	common := nv[0]
	ps := hd + attnPad
	for b0 := 0; b0 < common; b0 += attnKeyBlock {
		b1 := min(b0+attnKeyBlock, common)
		for k := b0; k < b1; k++ {
			copy(pack[(k-b0)*ps:][:hd], vc[keys[k]*stride:][:hd])
		}
		attnPV(out, hd, pack, ps, scores[b0:], nk, nq, b1-b0, hd)
	}
	r0 := 0
	for k := common; k < nk; k++ {
		for nv[r0] <= k {
			r0++
		}
		q0 := r0 * heads
		attnPV(out[q0*hd:], hd, vc[keys[k]*stride:], stride, scores[q0*nk+k:], nk, nq-q0, 1, hd)
	}
	for qi, z := range zs[:nq] {
		for i := range hd {
			out[qi*hd+i] /= z
		}
	}
}

// attnQKGo is attnQK without vector units, and its order of additions:
// each dot in four lanes, lane l the elements i ≡ l (mod 4) in order with
// one FMA each, then (l0+l2) + (l1+l3).
func attnQKGo(q []float64, qs int, k []float32, ks int, out []float64, os, nq, n, hd int) {
	for r := range nq {
		qr := q[r*qs:][:hd]
		for j := range n {
			var l [4]float64
			for i, x := range k[j*ks:][:hd] {
				l[i&3] = math.FMA(qr[i], float64(x), l[i&3])
			}
			out[r*os+j] = (l[0] + l[2]) + (l[1] + l[3])
		}
	}
}

// attnPVGo is attnPV without vector units: acc_r += w[r·ws+j]·v_j for the
// keys in order, one FMA per element.
func attnPVGo(acc []float64, as int, v []float32, vs int, w []float64, ws, nq, n, hd int) {
	for r := range nq {
		a := acc[r*as:][:hd]
		for j := range n {
			wj := w[r*ws+j]
			for i, x := range v[j*vs:][:hd] {
				a[i] = math.FMA(wj, float64(x), a[i])
			}
		}
	}
}
