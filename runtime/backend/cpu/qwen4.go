package cpu

import (
	"fmt"
	"math"
	"sort"

	"github.com/strata-llm/strata/graph"
)

// Kernels of Qwen3.8-Flash-Next (qwen4_exp): hyper-connections, PLE and the
// QSA indexer. Math: ../shared/specs/qwen4_exp.md §2.3, §2.4, §3.2.

// denseSelection in a row's selection count means "every visible key": the
// row's complete blocks fit the budget.
const denseSelection = math.MaxUint32

// rope rotates the first dim values of a vector, NeoX (rotate-half) pairs
// (i, i+dim/2), with HF's float32 inv_freq, angles, cos and sin.
type rope struct {
	invFreq []float32
}

func newRope(theta float64, dim int) rope {
	r := rope{invFreq: make([]float32, dim/2)}
	for i := range r.invFreq {
		r.invFreq[i] = float32(1 / math.Pow(theta, float64(float32(float64(2*i)/float64(dim)))))
	}
	return r
}

func (r rope) apply(v []float32, pos int) {
	half := len(r.invFreq)
	for i := 0; i < half; i++ {
		ang := float32(pos) * r.invFreq[i]
		c, s := float64(float32(math.Cos(float64(ang)))), float64(float32(math.Sin(float64(ang))))
		x0, x1 := float64(v[i]), float64(v[i+half])
		v[i] = float32(x0*c - x1*s)
		v[i+half] = float32(x1*c + x0*s)
	}
}

// normalize1p is the zero-centred RMSNorm of one vector: dst = src·rsqrt(mean(src²)+eps)·(1+w).
func normalize1p(src, dst, w []float32, eps float64) {
	s := rmsScale(src, eps)
	for i := range src {
		dst[i] = float32(float64(float32(float64(src[i])*s)) * (1 + float64(w[i])))
	}
}

// hcAct: the gated residual's low-rank activation, silu(x / streams).
func hcAct(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	dim, streams := a.int(graph.ConstDim), float64(a.int(graph.ConstStreams))
	x, y := a.f32n("x", p.max*dim), a.f32n("y", p.max*dim)
	return func() {
		for i := 0; i < p.rows()*dim; i++ {
			y[i] = float32(silu(float64(x[i]) / streams))
		}
	}, a.err
}

// hcMix: the block input, the mean over streams of sigmoid(g_s) ⊙ xn_s.
func hcMix(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	H, C := a.int(graph.ConstHidden), a.int(graph.ConstStreams)
	xn, g, y := a.f32n("xn", p.max*C*H), a.f32n("g", p.max*C*H), a.f32n("y", p.max*H)
	return func() {
		for t := 0; t < p.rows(); t++ {
			for i := 0; i < H; i++ {
				var sum float64
				for s := 0; s < C; s++ {
					k := t*C*H + s*H + i
					sum += sigmoid(float64(g[k])) * float64(xn[k])
				}
				y[t*H+i] = float32(sum / float64(C))
			}
		}
	}, a.err
}

// hcInject: x_s += 2·sigmoid(c_s / streams) · y, the block output written
// back into every stream with its own dynamic weight.
func hcInject(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	H, C := a.int(graph.ConstHidden), a.int(graph.ConstStreams)
	x, y, c := a.f32n("x", p.max*C*H), a.f32n("y", p.max*H), a.f32n("c", p.max*C)
	return func() {
		for t := 0; t < p.rows(); t++ {
			for s := 0; s < C; s++ {
				w := 2 * sigmoid(float64(c[t*C+s])/float64(C))
				xs := x[t*C*H+s*H : t*C*H+(s+1)*H]
				for i := range xs {
					xs[i] = float32(float64(xs[i]) + w*float64(y[t*H+i]))
				}
			}
		}
	}, a.err
}

// pleGate: per stream, r = ⟨k_s, q_s⟩/√H, r′ = sign(r)·√max(|r|, 1e-6),
// z_s = sigmoid(r′)·v.
func pleGate(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	H, C := a.int(graph.ConstHidden), a.int(graph.ConstStreams)
	k, q, v, z := a.f32n("k", p.max*C*H), a.f32n("q", p.max*C*H), a.f32n("v", p.max*H), a.f32n("z", p.max*C*H)
	scale := 1 / math.Sqrt(float64(H))
	return func() {
		for t := 0; t < p.rows(); t++ {
			for s := 0; s < C; s++ {
				off := t*C*H + s*H
				r := float64(dot(k[off:off+H], q[off:off+H])) * scale
				if r != 0 { // torch.sign(0) = 0 keeps r′ = 0
					r = math.Copysign(math.Sqrt(math.Max(math.Abs(r), 1e-6)), r)
				}
				gate := sigmoid(r)
				for i := 0; i < H; i++ {
					z[off+i] = float32(gate * float64(v[t*H+i]))
				}
			}
		}
	}, a.err
}

// pleConv: the dilated causal depthwise conv over [state ‖ zn rows], SiLU,
// added with z to the streams: x += z + silu(Σ_k w[c,k]·zn[t − (K−1)·d + k·d]).
// The state keeps the last (K−1)·d normalised inputs.
func pleConv(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	dim, K, dil := a.int(graph.ConstDim), a.int(graph.ConstKernel), a.int(graph.ConstDilation)
	L := (K - 1) * dil
	z, zn, w := a.f32n("z", p.max*dim), a.f32n("zn", p.max*dim), a.f32n("w", dim*K)
	state, x := a.f32n("state", L*dim), a.f32n("x", p.max*dim)
	return func() {
		n := p.rows()
		a.pool.parallel(dim, n*K, func(lo, hi int) {
			hist := make([]float32, L+n)
			for c := lo; c < hi; c++ {
				for j := 0; j < L; j++ {
					hist[j] = state[j*dim+c]
				}
				for t := 0; t < n; t++ {
					hist[L+t] = zn[t*dim+c]
				}
				wc := w[c*K : (c+1)*K]
				for t := 0; t < n; t++ {
					var s float64
					for k := 0; k < K; k++ {
						s += float64(wc[k]) * float64(hist[t+k*dil])
					}
					conv := silu(float64(float32(s)))
					x[t*dim+c] = float32(float64(x[t*dim+c]) + float64(float32(float64(z[t*dim+c])+conv)))
				}
				for j := 0; j < L; j++ {
					state[j*dim+c] = hist[n+j]
				}
			}
		})
	}, a.err
}

// indexDims are the QSA indexer's shapes.
type indexDims struct{ heads, headDim, rotDim, ratio, topK, ctx int }

func (a *args) indexDims() indexDims {
	return indexDims{heads: a.int(graph.ConstHeads), headDim: a.int(graph.ConstHeadDim), rotDim: a.int(graph.ConstRotDim),
		ratio: a.int(graph.ConstRatio), topK: a.int(graph.ConstTopK), ctx: a.int(graph.ConstCtx)}
}

// indexPrep: the indexer queries RoPE(q_layernorm(q)) at the row's position,
// and the row's raw key (pre-norm, pre-RoPE) into the raw-key cache.
func indexPrep(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	ix := a.indexDims()
	eps, theta := a.scalar("eps"), a.scalar("rope_theta")
	D := ix.headDim
	width := (ix.heads + 1) * D
	qk, qn := a.f32n("qk", p.max*width), a.f32n("q_norm", D)
	q, raw := a.f32n("q", p.max*ix.heads*D), a.f32n("raw", ix.ctx*D)
	rot := newRope(theta, ix.rotDim)
	return func() {
		for t := 0; t < p.rows(); t++ {
			pos := p.pos() + t
			if pos >= ix.ctx {
				return
			}
			for h := 0; h < ix.heads; h++ {
				dst := q[(t*ix.heads+h)*D:][:D]
				normalize1p(qk[t*width+h*D:][:D], dst, qn, eps)
				rot.apply(dst, pos)
			}
			copy(raw[pos*D:(pos+1)*D], qk[t*width+ix.heads*D:][:D])
		}
	}, a.err
}

// indexPool: for every block completed by this window's rows, its pooled key
// RoPE_{first position}(k_layernorm(mean of its raw keys)), kept in the
// cache so no later window recomputes it.
func indexPool(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	ix := a.indexDims()
	eps, theta := a.scalar("eps"), a.scalar("rope_theta")
	D := ix.headDim
	raw, kn := a.f32n("raw", ix.ctx*D), a.f32n("k_norm", D)
	pooled := a.f32n("pooled", (ix.ctx+ix.ratio-1)/ix.ratio*D)
	rot := newRope(theta, ix.rotDim)
	return func() {
		mean := make([]float32, D)
		for t := 0; t < p.rows(); t++ {
			pos := p.pos() + t
			if pos >= ix.ctx || (pos+1)%ix.ratio != 0 {
				continue
			}
			j := pos / ix.ratio
			for i := range mean {
				var s float64
				for k := j * ix.ratio; k < (j+1)*ix.ratio; k++ {
					s += float64(raw[k*D+i])
				}
				mean[i] = float32(s / float64(ix.ratio))
			}
			dst := pooled[j*D : (j+1)*D]
			normalize1p(mean, dst, kn, eps)
			rot.apply(dst, j*ix.ratio)
		}
	}, a.err
}

// indexSelect: per row, the score of every complete visible block,
// Σ_h relu(q_h·K_j)/√D, and the top-k blocks (a tie goes to the lower block),
// written ascending; rows whose blocks all fit are marked dense.
func indexSelect(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	ix := a.indexDims()
	D := ix.headDim
	q, pooled := a.f32n("q", p.max*ix.heads*D), a.f32n("pooled", (ix.ctx+ix.ratio-1)/ix.ratio*D)
	sel, count := a.u32("sel"), a.u32("count")
	if a.err == nil && (len(sel) < p.max*ix.topK || len(count) < p.max) {
		a.fail(fmt.Errorf("selection bindings too small for %d rows of %d blocks", p.max, ix.topK))
	}
	scale := float32(1 / math.Sqrt(float64(D)))
	return func() {
		var scores []float32
		var order []int
		for t := 0; t < p.rows(); t++ {
			nb := (p.pos() + t + 1) / ix.ratio
			if nb <= ix.topK {
				count[t] = denseSelection
				continue
			}
			scores, order = scores[:0], order[:0]
			for j := 0; j < nb; j++ {
				var s float32
				for h := 0; h < ix.heads; h++ {
					s += max(dot(q[(t*ix.heads+h)*D:][:D], pooled[j*D:(j+1)*D]), 0)
				}
				scores = append(scores, s*scale)
				order = append(order, j)
			}
			sort.SliceStable(order, func(x, y int) bool { return scores[order[x]] > scores[order[y]] })
			top := order[:ix.topK]
			sort.Ints(top)
			for k, j := range top {
				sel[t*ix.topK+k] = uint32(j)
			}
			count[t] = uint32(ix.topK)
		}
	}, a.err
}
