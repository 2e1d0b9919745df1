package cpu

import "math"

// attnKeyBlock is how many cache rows attention takes at a time for all
// the query vectors of a tile: 64 rows of a 256-wide head are 64 KiB of
// keys (then as much of values), which stay in the core's L2 while the
// tile's queries pass over them three at a time.
const attnKeyBlock = 64

// attnTileQueries is how many query vectors a prefill tile aims at: rows
// of the window times the query heads of a KV head (3 × 8 in Qwen3-Next),
// so each cache row read from memory serves that many queries.
const attnTileQueries = 24

// attnTile is causal softmax attention for rows × heads query vectors that
// share one KV head: q and out hold them row-major ((r·heads+g)·hd), row r
// sees the cache rows keys[:nv[r]] (keys ascending, nv non-decreasing, at
// least 1), key s's row at kc[s·stride:][:hd] and vc[s·stride:][:hd].
// scores holds rows·heads·nv[rows−1] values.
//
// Every q·k has attnQKGo's order of additions and every output element sums
// its keys in order, one FMA each, so a row's result does not depend on the
// tile it is in (one row, or any number): decode, prefill windows of any
// size and the tiles agree to the bit.
func attnTile(out, q []float64, rows, heads, hd int, keys, nv []int, kc, vc []float32, stride int, scale float64, scores []float64) {
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
	for qi := range nq {
		sc := scores[qi*nk : qi*nk+nv[qi/heads]]
		mx := math.Inf(-1)
		for k := range sc {
			sc[k] *= scale
			mx = math.Max(mx, sc[k])
		}
		expShift(sc, mx)
		var z float64
		for _, v := range sc {
			z += v
		}
		for k := range sc {
			sc[k] /= z
		}
	}
	// The weighted values: the keys every row sees, block by block, then
	// each key of the diagonal for the rows that see it.
	out = out[:nq*hd]
	clear(out)
	common := nv[0]
	for b0 := 0; b0 < common; b0 += attnKeyBlock {
		runs(b0, min(b0+attnKeyBlock, common), func(k, run int) {
			attnPV(out, hd, vc[keys[k]*stride:], stride, scores[k:], nk, nq, run, hd)
		})
	}
	r0 := 0
	for k := common; k < nk; k++ {
		for nv[r0] <= k {
			r0++
		}
		q0 := r0 * heads
		attnPV(out[q0*hd:], hd, vc[keys[k]*stride:], stride, scores[q0*nk+k:], nk, nq-q0, 1, hd)
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
