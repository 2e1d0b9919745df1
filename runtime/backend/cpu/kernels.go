package cpu

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/internal/greedy"
	"github.com/strata-llm/strata/models/quant"
	"github.com/strata-llm/strata/runtime/backend"
)

// The math follows the specs (../shared/specs/qwen3_next.md): activations are
// float32, every reduction accumulates in float64 and rounds once, so the cpu
// backend sits as close to the float64 reference as float32 storage allows.

// matrix is a weight matrix of rows × cols in a storage format; each row is
// stored as rl says (zero-padded to whole blocks when cols is not).
type matrix struct {
	data       []byte
	rl         quant.RowLayout
	rows, cols int
	rowBytes   int
}

func (a *args) matrix(name string, format, rows, cols int) matrix {
	rl := a.rowLayout(name, 0, format, cols)
	data := a.bytes(name)
	if rl.Format == nil {
		return matrix{}
	}
	m := matrix{data: data, rl: rl, rows: rows, cols: cols, rowBytes: rl.RowBytes()}
	if a.err == nil && len(data) < rows*m.rowBytes {
		a.fail(fmt.Errorf("binding %q has %d bytes, a %d×%d %s matrix needs %d", name, len(data), rows, cols, rl.Format.Name, rows*m.rowBytes))
	}
	return m
}

// rowLayout is how rows of cols elements are stored in the weight tensor
// placed at byte off of binding name: its format (which must be the one the
// dispatch names) and padding come from the graph's tensor record; without
// one, rows that are not whole blocks can only be padded ones.
func (a *args) rowLayout(name string, off, format, cols int) quant.RowLayout {
	f, err := quant.ByCode(format)
	if err != nil {
		a.fail(fmt.Errorf("binding %q: %w", name, err))
		return quant.RowLayout{}
	}
	rl := quant.RowLayout{Format: f, Len: cols, Stored: (cols + f.BlockElems - 1) / f.BlockElems * f.BlockElems}
	b, ok := a.d.Arg(name)
	if !ok {
		return rl
	}
	t, ok := a.tensors[tensorKey{b.Buffer, b.Offset + int64(off)}]
	if !ok {
		return rl
	}
	if t.Format != f.Name || t.Shape[len(t.Shape)-1] != cols || t.RowStored()%f.BlockElems != 0 || t.RowStored() < cols {
		a.fail(fmt.Errorf("binding %q: tensor %s (%s, rows of %d stored as %d) does not fit a %s kernel over rows of %d", name, t.Name, t.Format, t.Shape[len(t.Shape)-1], t.RowStored(), f.Name, cols))
		return quant.RowLayout{}
	}
	rl.Stored = t.RowStored()
	return rl
}

// row returns row i as float32, decoding into scratch unless the data is f32.
func (m matrix) row(i int, scratch []float32) []float32 {
	b := m.data[i*m.rowBytes : (i+1)*m.rowBytes]
	if m.rl.Format.Code == 0 {
		return backend.Float32s(b)[:m.cols]
	}
	m.rl.DecodeRow(b, scratch[:m.cols])
	return scratch[:m.cols]
}

// dotRow is row i · x: every format multiplies its blocks in place
// (Format.Dot32: float32 accumulation, vectorized where the machine
// allows), never decoding the row.
func (m matrix) dotRow(i int, x []float32) float32 {
	return m.rl.Dot32(m.data[i*m.rowBytes:(i+1)*m.rowBytes], x)
}

// at returns a view of rows [i, i+n) starting at byte offset off of the data,
// stored as rl.
func (m matrix) at(off int, rl quant.RowLayout, rows int) matrix {
	rb := rl.RowBytes()
	return matrix{data: m.data[off : off+rows*rb], rl: rl, rows: rows, cols: rl.Len, rowBytes: rb}
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += float64(a[i]) * float64(b[i])
		s1 += float64(a[i+1]) * float64(b[i+1])
		s2 += float64(a[i+2]) * float64(b[i+2])
		s3 += float64(a[i+3]) * float64(b[i+3])
	}
	for ; i < len(a); i++ {
		s0 += float64(a[i]) * float64(b[i])
	}
	return float32((s0 + s1) + (s2 + s3))
}

func silu(x float64) float64    { return x / (1 + math.Exp(-x)) }
func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// expShiftGo is expShift's reference: x[i] = e^(x[i]−m).
func expShiftGo(x []float64, m float64) {
	for i, v := range x {
		x[i] = math.Exp(v - m)
	}
}

// siluRowGo is siluRow's reference: x[i] = float32(silu(x[i])).
func siluRowGo(x []float32) {
	for i, v := range x {
		x[i] = float32(silu(float64(v)))
	}
}

// siluMulGo is siluMul's reference: h[i] = float32(silu(g[i])·u[i]).
func siluMulGo(h, g, u []float32) {
	for i := range h {
		h[i] = float32(silu(float64(g[i])) * float64(u[i]))
	}
}

// rmsScale is 1/sqrt(mean(x²)+eps).
func rmsScale(x []float32, eps float64) float64 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	return 1 / math.Sqrt(s/float64(len(x))+eps)
}

func embed(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	dim, vocab, copies := a.int(graph.ConstDim), a.int(graph.ConstVocab), a.int(graph.ConstCopies)
	table := a.matrix("table", a.int(graph.ConstWFmt), vocab, dim)
	W := dim * copies // hyper-connection streams start as copies of the embedding
	x := a.f32n("x", p.max*W)
	return func() {
		for t := 0; t < p.rows(); t++ {
			tok := p.token(t)
			if tok >= vocab { // the runtime validates tokens; never read past the table
				continue
			}
			row := x[t*W : t*W+dim]
			copy(row, table.row(tok, row))
			for s := 1; s < copies; s++ {
				copy(x[t*W+s*dim:t*W+(s+1)*dim], row)
			}
		}
	}, a.err
}

// rmsnorm: y = x·rsqrt(mean(x²)+eps)·(1+w) (zero-centred) or ·w, with the
// statistics taken per group of values (hyper-connection streams).
func rmsnorm(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	dim, group := a.int(graph.ConstDim), a.int(graph.ConstGroup)
	one := float64(a.int(graph.ConstZeroCentred))
	eps := a.scalar("eps")
	x, w, y := a.f32n("x", p.max*dim), a.f32n("w", dim), a.f32n("y", p.max*dim)
	if a.err == nil && (group <= 0 || dim%group != 0) {
		a.fail(fmt.Errorf("group %d does not divide dim %d", group, dim))
	}
	return func() {
		for t := 0; t < p.rows(); t++ {
			for g := t * dim; g < (t+1)*dim; g += group {
				xr, yr, wr := x[g:g+group], y[g:g+group], w[g-t*dim:g-t*dim+group]
				s := rmsScale(xr, eps)
				for i := range xr {
					yr[i] = float32(float64(float32(float64(xr[i])*s)) * (one + float64(wr[i])))
				}
			}
		}
	}, a.err
}

// matmul: y[r] = W x[r] for every live row; with fold f each row holds f
// sub-rows (one per hyper-connection stream) that all go through W.
func matmul(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	n, k := a.int(graph.ConstN), a.int(graph.ConstK)
	fold := a.optInt(graph.ConstFold, 1)
	w := a.matrix("w", a.int(graph.ConstWFmt), n, k)
	x, y := a.f32n("x", p.max*fold*k), a.f32n("y", p.max*fold*n)
	name := a.tensorName("w", 0)
	return func() {
		if o := currentObserver(); o != nil && name != "" {
			o.Activations(name, 0, 1, k, x[:p.rows()*fold*k])
		}
		matmulRows(a.pool, w, x, y, p.rows()*fold)
	}, a.err
}

// matmulRows is y[t] = W x[t] for rows t of x (k = W.cols wide) into y
// (n = W.rows wide), split by output rows over the threads. Each weight row
// meets the activation rows four at a time (Dot32x4: its blocks decoded
// once for the four), while it is in cache; the activation rows go in
// blocks that stay in the core's cache across the weight rows. (Decoding
// the row to float32 once and taking float32 dots was slower: two float
// streams per multiply-add against one.) Weights with an integer kernel
// take it (matmulRowsAct8), unless the rows come four at a time and only
// the float32 path has a four-row kernel for the format.
func matmulRows(pl *pool, w matrix, x, y []float32, rows int) {
	if k8, ok := w.act8Kernel(); ok && (rows < 4 || k8.HasDot4() || w.rl.Format.Dot32x4 == nil) {
		matmulRowsAct8(pl, w, k8, x, y, rows)
		return
	}
	n, k := w.rows, w.cols
	block := max(4, min(rows, xBlockBytes/(4*k))/4*4)
	pl.parallel(n, k*rows, func(lo, hi int) {
		var out [4]float32
		for t0 := 0; t0 < rows; t0 += block {
			t1 := min(rows, t0+block)
			for i := lo; i < hi; i++ {
				row := w.data[i*w.rowBytes : (i+1)*w.rowBytes]
				t := t0
				for ; t+4 <= t1; t += 4 {
					w.rl.Dot32x4(row, x[t*k:], k, &out)
					for r, v := range out {
						y[(t+r)*n+i] = v
					}
				}
				for ; t < t1; t++ {
					y[t*n+i] = w.rl.Dot32(row, x[t*k:(t+1)*k])
				}
			}
		}
	})
}

// xBlockBytes bounds the activation rows matmulRows keeps in cache at once.
const xBlockBytes = 512 << 10

func residualAdd(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	dim := a.int(graph.ConstDim)
	x, y := a.f32n("x", p.max*dim), a.f32n("y", p.max*dim)
	return func() {
		for i := 0; i < p.rows()*dim; i++ {
			x[i] += y[i]
		}
	}, a.err
}

func swiglu(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	dim := a.int(graph.ConstDim)
	g, u, y := a.f32n("gate", p.max*dim), a.f32n("up", p.max*dim), a.f32n("y", p.max*dim)
	return func() {
		m := p.rows() * dim
		siluMul(y[:m], g[:m], u[:m])
	}, a.err
}

// copyRows copies the live rows of x into y.
func copyRows(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	dim := a.int(graph.ConstDim)
	x, y := a.f32n("x", p.max*dim), a.f32n("y", p.max*dim)
	return func() { copy(y[:p.rows()*dim], x[:p.rows()*dim]) }, a.err
}

// concat writes [x[t] ‖ y[t]] for every live row.
func concat(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	na, nb := a.int(graph.ConstA), a.int(graph.ConstB)
	x, y, z := a.f32n("x", p.max*na), a.f32n("y", p.max*nb), a.f32n("z", p.max*(na+nb))
	return func() {
		for t := 0; t < p.rows(); t++ {
			copy(z[t*(na+nb):], x[t*na:(t+1)*na])
			copy(z[t*(na+nb)+na:], y[t*nb:(t+1)*nb])
		}
	}, a.err
}

// streamAdd adds y[t] to every hyper-connection stream of x[t].
func streamAdd(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	H, C := a.int(graph.ConstHidden), a.int(graph.ConstStreams)
	x, y := a.f32n("x", p.max*C*H), a.f32n("y", p.max*H)
	return func() {
		for t := 0; t < p.rows(); t++ {
			for s := 0; s < C; s++ {
				for i := 0; i < H; i++ {
					x[(t*C+s)*H+i] += y[t*H+i]
				}
			}
		}
	}, a.err
}

func copyLastRow(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	dim := a.int(graph.ConstDim)
	x, y := a.f32("x"), a.f32n("y", dim)
	return func() {
		last := p.rows() - 1 // the last live row, as the MSL reads it (live_rows)
		copy(y[:dim], x[last*dim:(last+1)*dim])
	}, a.err
}

// argmaxRows: best[2t] is the first index of logits row t's largest value
// (a NaN never wins; 0 when nothing beats −Inf), best[2t+1] is 1 when the
// row holds a NaN or ±Inf.
func argmaxRows(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	rows, dim := a.int(graph.ConstRows), a.int(graph.ConstDim)
	logits, best := a.f32n("logits", rows*dim), a.u32("best")
	if a.err == nil && len(best) < 2*rows {
		a.fail(fmt.Errorf("binding \"best\" holds %d words, the kernel needs %d", len(best), 2*rows))
	}
	return func() {
		for t := range min(p.rows(), rows) {
			at, finite := greedy.Choose(logits[t*dim : (t+1)*dim])
			best[2*t], best[2*t+1] = uint32(at), 0
			if !finite {
				best[2*t+1] = 1
			}
		}
	}, a.err
}

// gdnDims are the Gated DeltaNet head counts and sizes of a dispatch.
type gdnDims struct {
	nk, nv, dk, dv, r, group, keyDim, valueDim, convDim int
	grouped                                             bool // Qwen3-Next's interleaved qkvz / ba rows
}

func (a *args) gdnDims() gdnDims {
	g := gdnDims{nk: a.int(graph.ConstNK), nv: a.int(graph.ConstNV), dk: a.int(graph.ConstDK), dv: a.int(graph.ConstDV), grouped: a.int(graph.ConstGrouped) != 0}
	if g.nk > 0 {
		g.r = g.nv / g.nk
	}
	g.group = 2*g.dk + 2*g.r*g.dv // q, k, then v and z of the group's r value heads
	g.keyDim, g.valueDim = g.nk*g.dk, g.nv*g.dv
	g.convDim = 2*g.keyDim + g.valueDim
	return g
}

// inWidth is the row width of the conv's input: qkvz (grouped) or qkv.
func (g gdnDims) inWidth() int {
	if g.grouped {
		return g.group * g.nk
	}
	return g.convDim
}

// inIndex maps a conv channel to its place in an input row.
func (g gdnDims) inIndex(c int) int {
	if g.grouped {
		return g.qkvzIndex(c)
	}
	return c
}

// qkvzIndex maps a conv channel (flat q | k | v order) to its place in a row
// of the grouped in_proj_qkvz output.
func (g gdnDims) qkvzIndex(c int) int {
	switch {
	case c < g.keyDim:
		return c/g.dk*g.group + c%g.dk
	case c < 2*g.keyDim:
		c -= g.keyDim
		return c/g.dk*g.group + g.dk + c%g.dk
	default:
		c -= 2 * g.keyDim
		j := c / g.dv
		return j/g.r*g.group + 2*g.dk + j%g.r*g.dv + c%g.dv
	}
}

// zIndex is the place of z element i of value head j in a qkvz row.
func (g gdnDims) zIndex(j, i int) int { return j/g.r*g.group + 2*g.dk + g.r*g.dv + j%g.r*g.dv + i }

// gdnConv: the causal depthwise conv over [state ‖ rows] per channel, then
// SiLU; the state keeps the last K-1 pre-activation inputs.
func gdnConv(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	g := a.gdnDims()
	K := a.int(graph.ConstKernel)
	C := g.convDim
	width := g.inWidth()
	inName := "qkv"
	if g.grouped {
		inName = "qkvz"
	}
	qkvz, w := a.f32n(inName, p.max*width), a.f32n("w", C*K)
	state, y := a.f32n("state", (K-1)*C), a.f32n("y", p.max*C)
	return func() {
		n := p.rows()
		a.pool.parallel(C, n*K, func(lo, hi int) {
			hist := make([]float32, K-1+n)
			for c := lo; c < hi; c++ {
				src := g.inIndex(c)
				for j := 0; j < K-1; j++ {
					hist[j] = state[j*C+c]
				}
				for t := 0; t < n; t++ {
					hist[K-1+t] = qkvz[t*width+src]
				}
				wc := w[c*K : (c+1)*K]
				for t := 0; t < n; t++ {
					var s float64
					for i := 0; i < K; i++ {
						s += float64(wc[i]) * float64(hist[t+i])
					}
					y[t*C+c] = float32(s)
				}
				for j := 0; j < K-1; j++ {
					state[j*C+c] = hist[n+j]
				}
			}
			for t := 0; t < n; t++ { // the activation, a row's run of channels at a time
				siluRow(y[t*C+lo : t*C+hi])
			}
		})
	}, a.err
}

// gdnGates: β = sigmoid(b), g = −exp(A_log)·softplus(a + dt_bias) per value head.
func gdnGates(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	g := a.gdnDims()
	// Grouped: per key head, b of its r value heads then a. Flat: b and a apart.
	var bIn, aIn []float32
	bStride, aStride := g.nv, g.nv
	if g.grouped {
		bIn = a.f32n("ba", p.max*2*g.nv)
		aIn, bStride, aStride = bIn, 2*g.nv, 2*g.nv
	} else {
		bIn, aIn = a.f32n("b", p.max*g.nv), a.f32n("a", p.max*g.nv)
	}
	aLog, dtBias := a.f32n("a_log", g.nv), a.f32n("dt_bias", g.nv)
	beta, decay := a.f32n("beta", p.max*g.nv), a.f32n("g", p.max*g.nv)
	return func() {
		for t := 0; t < p.rows(); t++ {
			for j := 0; j < g.nv; j++ {
				bi, ai := j, j
				if g.grouped {
					grp := j / g.r * 2 * g.r
					bi, ai = grp+j%g.r, grp+g.r+j%g.r
				}
				b := float64(bIn[t*bStride+bi])
				av := float64(aIn[t*aStride+ai]) + float64(dtBias[j])
				sp := av
				if av <= 20 { // torch's softplus threshold
					sp = math.Log1p(math.Exp(av))
				}
				beta[t*g.nv+j] = float32(sigmoid(b))
				decay[t*g.nv+j] = float32(-float64(float32(math.Exp(float64(aLog[j])))) * sp)
			}
		}
	}, a.err
}

// l2normalize scales v to unit length the way HF does: v·rsqrt(Σv² + 1e-6),
// times extra.
func l2normalize(v []float32, extra float64) {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	k := extra / math.Sqrt(s+1e-6)
	for i := range v {
		v[i] = float32(float64(v[i]) * k)
	}
}

// gdnRule: the gated delta rule, token by token, per value head, on state
// S[dk][dv] that persists across windows.
func gdnRule(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	g := a.gdnDims()
	C := g.convDim
	conv := a.f32n("conv", p.max*C)
	beta, decay := a.f32n("beta", p.max*g.nv), a.f32n("g", p.max*g.nv)
	state, o := a.f32n("state", g.nv*g.dk*g.dv), a.f32n("o", p.max*g.valueDim)
	qScale := 1 / math.Sqrt(float64(g.dk))
	return func() {
		n := p.rows()
		a.pool.parallel(g.nv, n*g.dk*g.dv, func(lo, hi int) {
			q, k := make([]float32, g.dk), make([]float32, g.dk)
			u := make([]float32, g.dv)
			delta := make([]float32, g.dv)
			for j := lo; j < hi; j++ {
				S := state[j*g.dk*g.dv : (j+1)*g.dk*g.dv]
				kh := j / g.r
				for t := 0; t < n; t++ {
					row := conv[t*C : (t+1)*C]
					copy(q, row[kh*g.dk:(kh+1)*g.dk])
					copy(k, row[g.keyDim+kh*g.dk:g.keyDim+(kh+1)*g.dk])
					v := row[2*g.keyDim+j*g.dv : 2*g.keyDim+(j+1)*g.dv]
					l2normalize(q, qScale)
					l2normalize(k, 1)
					e := float32(math.Exp(float64(decay[t*g.nv+j])))
					b := float64(beta[t*g.nv+j])
					// float32 sweeps (gdn.go), vectorized where the machine allows
					gdnDecayDot(S, k, u, g.dk, g.dv, e)
					for c := range delta {
						delta[c] = float32(b * (float64(v[c]) - float64(u[c])))
					}
					gdnUpdateDot(S, k, delta, q, u, g.dk, g.dv)
					out := o[t*g.valueDim+j*g.dv : t*g.valueDim+(j+1)*g.dv]
					copy(out, u)
				}
			}
		})
	}, a.err
}

// gdnNormGate: per value head, y = w·(o·rsqrt(mean(o²)+eps)) · act(z), act
// SiLU (Qwen3-Next) or sigmoid (Qwen3.8's output_gate_type).
func gdnNormGate(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	g := a.gdnDims()
	eps := a.scalar("eps")
	gateSigmoid := a.int(graph.ConstGateSigmoid) != 0
	zName, width, zIndex := "z", g.valueDim, func(j, i int) int { return j*g.dv + i }
	if g.grouped {
		zName, width, zIndex = "qkvz", g.inWidth(), g.zIndex
	}
	o, zIn := a.f32n("o", p.max*g.valueDim), a.f32n(zName, p.max*width)
	w, y := a.f32n("w", g.dv), a.f32n("y", p.max*g.valueDim)
	return func() {
		n := p.rows()
		a.pool.parallel(n*g.nv, g.dv*8, func(lo, hi int) {
			normed := make([]float32, g.dv)
			for th := lo; th < hi; th++ {
				t, j := th/g.nv, th%g.nv
				oh := o[t*g.valueDim+j*g.dv : t*g.valueDim+(j+1)*g.dv]
				yh := y[t*g.valueDim+j*g.dv : t*g.valueDim+(j+1)*g.dv]
				s := rmsScale(oh, eps)
				for i := range oh {
					normed[i] = float32(float64(w[i]) * float64(float32(float64(oh[i])*s)))
				}
				// A head's z is one run of the row in either layout.
				zh := zIn[t*width+zIndex(j, 0):][:g.dv]
				if !gateSigmoid {
					siluMul(yh, zh, normed) // silu(z)·normed
					continue
				}
				for i, z := range zh {
					yh[i] = float32(float64(normed[i]) * sigmoid(float64(z)))
				}
			}
		})
	}, a.err
}

// attnDims are the attention shapes of a dispatch.
type attnDims struct{ heads, kvHeads, headDim, rotDim, ctx, qStride int }

func (a *args) attnDims() attnDims {
	d := attnDims{heads: a.int(graph.ConstHeads), kvHeads: a.int(graph.ConstKVHeads), headDim: a.int(graph.ConstHeadDim), rotDim: a.int(graph.ConstRotDim), ctx: a.int(graph.ConstCtx)}
	d.qStride = d.headDim
	if a.int(graph.ConstGate) != 0 {
		d.qStride = 2 * d.headDim // per head: query then gate
	}
	return d
}

// attnPrep: q/k norms (1+w), partial NeoX RoPE at position pos+t, and the
// row's k and v written into the KV cache.
func attnPrep(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	ad := a.attnDims()
	eps, theta := a.scalar("eps"), a.scalar("rope_theta")
	hd, kvDim := ad.headDim, ad.kvHeads*ad.headDim
	qfull, k, v := a.f32n("qfull", p.max*ad.heads*ad.qStride), a.f32n("k", p.max*kvDim), a.f32n("v", p.max*kvDim)
	qn, kn := a.f32n("q_norm", hd), a.f32n("k_norm", hd)
	q := a.f32n("q", p.max*ad.heads*hd)
	kc, vc := a.f32n("kcache", ad.ctx*kvDim), a.f32n("vcache", ad.ctx*kvDim)
	rot := newRope(theta, ad.rotDim)
	normRope := func(src, dst, w []float32, pos int) {
		normalize1p(src, dst, w, eps)
		rot.apply(dst, pos)
	}
	return func() {
		for t := 0; t < p.rows(); t++ {
			pos := p.pos() + t
			if pos >= ad.ctx { // the runtime refuses windows past the context
				return
			}
			for h := 0; h < ad.heads; h++ {
				src := qfull[t*ad.heads*ad.qStride+h*ad.qStride:][:hd]
				normRope(src, q[(t*ad.heads+h)*hd:][:hd], qn, pos)
			}
			for h := 0; h < ad.kvHeads; h++ {
				normRope(k[t*kvDim+h*hd:][:hd], kc[pos*kvDim+h*hd:][:hd], kn, pos)
			}
			copy(vc[pos*kvDim:(pos+1)*kvDim], v[t*kvDim:(t+1)*kvDim])
		}
	}, a.err
}

// attention: causal softmax attention over the cache, GQA, times
// sigmoid(gate) when the model gates its output.
func attention(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	ad := a.attnDims()
	gated := a.int(graph.ConstGate) != 0
	hd, kvDim := ad.headDim, ad.kvHeads*ad.headDim
	q, qfull := a.f32n("q", p.max*ad.heads*hd), a.f32n("qfull", p.max*ad.heads*ad.qStride)
	kc, vc := a.f32n("kcache", ad.ctx*kvDim), a.f32n("vcache", ad.ctx*kvDim)
	y := a.f32n("y", p.max*ad.heads*hd)
	scale := 1 / math.Sqrt(float64(hd))
	group := ad.heads / ad.kvHeads
	sparse := a.int(graph.ConstSparse) != 0
	var sel, count []uint32
	ratio, topK := a.int(graph.ConstRatio), a.int(graph.ConstTopK)
	if sparse {
		sel, count = a.u32("sel"), a.u32("count")
		if a.err == nil && (len(sel) < p.max*topK || len(count) < p.max) {
			a.fail(fmt.Errorf("selection bindings too small"))
		}
	}
	return func() {
		n := p.rows()
		// A tile is rows of the window times the query heads sharing a KV
		// head (or a part of them), about attnTileQueries query vectors, so
		// each block of the cache is read from memory once for all of them
		// (the cache outgrows the caches at long contexts) and each key row
		// loaded serves them all. A group is split only when there are
		// fewer (tile, KV head) pairs than threads; a row with its own
		// selection of keys is a tile of its own. Long contexts take fewer
		// rows, to keep a thread's scores under attnTileScores.
		tileRows := max(1, min(attnTileQueries/group, n*ad.kvHeads/a.pool.threads, attnTileScores/(group*max(1, p.pos()+n))))
		if sparse {
			for t := range n {
				if count[t] != denseSelection {
					tileRows = 1
				}
			}
		}
		tiles := (n + tileRows - 1) / tileRows
		parts := 1
		if pairs := tiles * ad.kvHeads; pairs < a.pool.threads {
			parts = min(group, (a.pool.threads+pairs-1)/pairs)
		}
		per := (group + parts - 1) / parts
		a.pool.parallel(tiles*ad.kvHeads*parts, (p.pos()+n)*hd*per*tileRows, func(lo, hi int) {
			scratch := getAttnScratch(tileRows, tileRows*per, p.pos()+n, hd)
			defer attnScratchPool.Put(scratch)
			keys, nv, acc, qd := scratch.keys[:0], scratch.nv, scratch.acc, scratch.qd
			for item := lo; item < hi; item++ {
				// The last tiles, with the most keys, first.
				tile := tiles - 1 - item/(ad.kvHeads*parts)
				kvh, part := item/parts%ad.kvHeads, item%parts
				h0 := kvh*group + part*per
				heads := min(per, kvh*group+group-h0)
				if heads <= 0 {
					continue
				}
				t0 := tile * tileRows
				rows := min(tileRows, n-t0)
				for r := range rows {
					for g := range heads {
						dst := qd[(r*heads+g)*hd:][:hd]
						for i, v := range q[((t0+r)*ad.heads+h0+g)*hd:][:hd] {
							dst[i] = float64(v)
						}
					}
				}
				last := p.pos() + t0 + rows - 1
				keys = keys[:0]
				if sparse && count[t0] != denseSelection { // one row
					// Selected blocks (ascending), then the forced tail.
					for _, j := range sel[t0*topK : t0*topK+int(count[t0])] {
						for s := int(j) * ratio; s < int(j+1)*ratio; s++ {
							keys = append(keys, s)
						}
					}
					for s := (last + 1) / ratio * ratio; s <= last; s++ {
						keys = append(keys, s)
					}
					nv[0] = len(keys)
				} else {
					for s := 0; s <= last; s++ {
						keys = append(keys, s)
					}
					for r := range rows {
						nv[r] = p.pos() + t0 + r + 1
					}
				}
				attnTile(acc, qd, rows, heads, hd, keys, nv[:rows], kc[kvh*hd:], vc[kvh*hd:], kvDim, scale, scratch)
				for r := range rows {
					t := t0 + r
					for g := range heads {
						h := h0 + g
						out := y[(t*ad.heads+h)*hd:][:hd]
						for i := range out {
							v := acc[(r*heads+g)*hd+i]
							if gated {
								v *= sigmoid(float64(qfull[t*ad.heads*ad.qStride+h*ad.qStride+hd+i]))
							}
							out[i] = float32(v)
						}
					}
				}
			}
		})
	}, a.err
}

// router: softmax over all experts, top-k by probability (lower index wins a
// tie), renormalised when norm_topk is set. Ids are written as uint32.
//
// With moce set (cache-aware routing), ranks below protect keep their
// experts; the remaining slots go to the best of ranks protect … max_rank−1
// (the true top max_rank; 0: all) by probability × (1 if resident else λ),
// where resident is the routing-visible residency the host wrote between
// windows. The weights stay the true probabilities of the chosen experts.
func router(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	E, K := a.int(graph.ConstExperts), a.int(graph.ConstTopK)
	norm := a.int(graph.ConstNormTopK) != 0
	logits := a.f32n("logits", p.max*E)
	ids, weights := a.u32("ids"), a.f32n("weights", p.max*K)
	if a.err == nil && len(ids) < p.max*K {
		a.fail(fmt.Errorf("binding \"ids\" too small"))
	}
	moce := a.optInt(graph.ConstMoCE, 0) != 0
	var resident []uint32
	var lambda float64
	protect, maxRank := 0, E
	if moce {
		resident = a.u32("resident")
		lambda = a.scalar("lambda")
		protect = a.int(graph.ConstProtect)
		if r := a.int(graph.ConstMaxRank); r > 0 {
			maxRank = min(r, E)
		}
		if a.err == nil && len(resident) < E {
			a.fail(fmt.Errorf("binding \"resident\" has %d entries, want %d", len(resident), E))
		}
	}
	return func() {
		// Each row: softmax over the E logits, the top K by probability
		// (stable: ties keep expert order), MoCE's re-rank of the
		// unprotected part of the top maxRank when on, and the weights.
		a.pool.parallel(p.rows(), E*16, func(lo, hi int) {
			prob := make([]float64, E)
			order := make([]int, E)
			score := make([]float64, E)
			for t := lo; t < hi; t++ {
				l := logits[t*E : (t+1)*E]
				mx := math.Inf(-1)
				for _, v := range l {
					mx = math.Max(mx, float64(v))
				}
				var z float64
				for e, v := range l {
					prob[e] = math.Exp(float64(v) - mx)
					z += prob[e]
				}
				for e := range prob {
					prob[e] /= z
					order[e] = e
				}
				slices.SortStableFunc(order, func(x, y int) int { return cmp.Compare(prob[y], prob[x]) }) // descending
				if moce && protect < K {
					// Re-rank the unprotected part of the true top max_rank by
					// the residency-weighted score; stable, so ties keep rank.
					cand := order[protect:maxRank]
					for _, e := range cand {
						score[e] = prob[e]
						if resident[e] == 0 {
							score[e] *= lambda
						}
					}
					slices.SortStableFunc(cand, func(x, y int) int { return cmp.Compare(score[y], score[x]) })
				}
				var sum float64
				for j := 0; j < K; j++ {
					sum += prob[order[j]]
				}
				for j := 0; j < K; j++ {
					w := prob[order[j]]
					if norm {
						w /= sum
					}
					ids[t*K+j] = uint32(order[j])
					weights[t*K+j] = float32(w)
				}
			}
		})
	}, a.err
}

// expertBlock addresses routed experts through smap: expert e of the layer
// sits at page smap[e] of the experts arena (gate, up and down at their
// offsets), wherever the streamer or the loader put it. gate and up (rows of
// hidden) and down (rows of inter) each have their own layout, since a row
// policy may pad or re-format one and not the others.
type expertBlock struct {
	data                    []byte
	smap                    []uint32
	gate, up, down          quant.RowLayout
	experts, hidden, inter  int
	stride                  int // bytes per expert block
	gateOff, upOff, downOff int
}

func (a *args) expertBlock() expertBlock {
	eb := expertBlock{data: a.bytes("experts"), smap: a.u32("smap"), experts: a.int(graph.ConstExperts), hidden: a.int(graph.ConstHidden), inter: a.int(graph.ConstInter),
		stride: a.int(graph.ConstStride), gateOff: a.int(graph.ConstGateOff), upOff: a.int(graph.ConstUpOff), downOff: a.int(graph.ConstDownOff)}
	// wfmt is the format of the parts this kernel reads: gate and up for
	// moe_gate_up, down for moe_down (a row policy may store down in another
	// format). The layer's tensor records (at its base in the experts
	// buffer) give the row layouts.
	wfmt := a.int(graph.ConstWFmt)
	base := int(a.expertBase[a.d.Layer])
	if a.d.Family == graph.FamilyMoEDown {
		eb.down = a.rowLayout("experts", base+eb.downOff, wfmt, eb.inter)
	} else {
		eb.gate = a.rowLayout("experts", base+eb.gateOff, wfmt, eb.hidden)
		eb.up = a.rowLayout("experts", base+eb.upOff, wfmt, eb.hidden)
	}
	if a.err == nil && len(eb.smap) < eb.experts {
		a.fail(fmt.Errorf("binding \"smap\" has %d entries, the layer has %d experts", len(eb.smap), eb.experts))
	}
	return eb
}

// matrix is one part of expert e, or ok = false when smap says it is not
// resident (the host makes every routed expert resident before its layer
// runs, so this is a guard, never a path).
func (eb expertBlock) matrix(e, off int, rl quant.RowLayout, rows int) (matrix, bool) {
	code := eb.smap[e]
	page := int(code & (1<<28 - 1))
	start := page*graph.ExpertPage + off
	if code == graph.SmapMiss || start+rows*rl.RowBytes() > len(eb.data) {
		return matrix{}, false
	}
	m := matrix{data: eb.data}
	return m.at(start, rl, rows), true
}

// expertGroup is the (row, choice) pairs tj routed to one expert.
type expertGroup struct {
	e   int
	tjs []int
}

// groupByExpert gathers the pairs of ids (n rows × K choices) by expert, in
// expert order, skipping ids past the layer's experts: a window's rows that
// share an expert then read its weights once, while they are in cache.
func groupByExpert(ids []uint32, experts int, into []expertGroup) []expertGroup {
	into = into[:0]
	order := make([]int, 0, len(ids))
	for tj, e := range ids {
		if int(e) < experts {
			order = append(order, tj)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return ids[order[a]] < ids[order[b]] })
	for i := 0; i < len(order); {
		e := int(ids[order[i]])
		j := i
		for j < len(order) && int(ids[order[j]]) == e {
			j++
		}
		into = append(into, expertGroup{e: e, tjs: order[i:j]})
		i = j
	}
	return into
}

// moeGateUp: h[t, j] = silu(gate_e x[t]) ⊙ (up_e x[t]) for the j-th chosen
// expert e, split over the experts the window routes to.
func moeGateUp(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	eb := a.expertBlock()
	K := a.int(graph.ConstTopK)
	H, I := eb.hidden, eb.inter
	x, ids, h := a.f32n("x", p.max*H), a.u32("ids"), a.f32n("h", p.max*K*I)
	names := a.gateUpNames(eb)
	pl := a.pool
	var groups []expertGroup
	return func() {
		n := p.rows()
		groups = groupByExpert(ids[:n*K], eb.experts, groups)
		gateUpGroups(pl, eb, K, x, n, groups, names, h)
	}, a.err
}

// gateUpNames are the gate and up tensors' names, for an Observer.
func (a *args) gateUpNames(eb expertBlock) []string {
	base := int(a.expertBase[a.d.Layer])
	return []string{a.tensorName("experts", base+eb.gateOff), a.tensorName("experts", base+eb.upOff)}
}

// gateUpGroups computes h[tj] = silu(gate_e x[tj/K]) ⊙ (up_e x[tj/K]) for
// the pairs tj of each group (expert e), x holding n rows.
func gateUpGroups(pl *pool, eb expertBlock, K int, x []float32, n int, groups []expertGroup, names []string, h []float32) {
	H, I := eb.hidden, eb.inter
	pairs := 0
	for _, g := range groups {
		pairs += len(g.tjs)
	}
	if o := currentObserver(); o != nil {
		for _, g := range groups {
			observeGroup(o, names, g.e, eb.experts, H, K, x, g.tjs, false)
		}
	}
	xs := newActRows(x, n, H, eb.gate, eb.up)
	defer xs.release()
	pl.parallel(len(groups), 2*I*H*pairs/max(len(groups), 1), func(lo, hi int) {
		gu := make([]float32, 2*I) // one row's gate and up values
		var ga *quant.Act8Rows     // a group's rows, gathered at one stride
		var sel, yoff []int
		for _, g := range groups[lo:hi] {
			gate, ok1 := eb.matrix(g.e, eb.gateOff, eb.gate, I)
			up, ok2 := eb.matrix(g.e, eb.upOff, eb.up, I)
			if !ok1 || !ok2 {
				continue
			}
			if xs.ar != nil && len(g.tjs) >= tileRows {
				// the expert's weights meet its rows four at a time
				if ga == nil {
					ga = act8Rows.Get().(*quant.Act8Rows)
					defer act8Rows.Put(ga)
				}
				sel, yoff = sel[:0], yoff[:0]
				for t, tj := range g.tjs {
					sel, yoff = append(sel, tj/K), append(yoff, 2*I*t)
				}
				for range tileSpare(len(sel), xs.k8...) { // rows for the tail's kernel to borrow
					sel = append(sel, sel[len(sel)-1])
				}
				ga.Gather(xs.ar, sel)
				if need := 2 * I * len(g.tjs); cap(gu) < need {
					gu = make([]float32, need)
				}
				act8Tile(xs.k8[0], gate, 0, I, ga, 0, gu, yoff)
				act8Tile(xs.k8[1], up, 0, I, ga, 0, gu[I:], yoff)
				for t, tj := range g.tjs {
					siluMul(h[tj*I:(tj+1)*I], gu[2*I*t:2*I*t+I], gu[2*I*t+I:2*I*(t+1)])
				}
				continue
			}
			for _, tj := range g.tjs {
				xs.dotRows(gate, 0, 0, tj/K, gu[:I])
				xs.dotRows(up, 1, 0, tj/K, gu[I:2*I])
				siluMul(h[tj*I:(tj+1)*I], gu[:I], gu[I:2*I])
			}
		}
	})
}

// scratch holds the window-sized buffers kernels need only while they run.
var scratch = sync.Pool{New: func() any { return new([]float32) }}

// moeDown: y[t] = Σ_j w[t, j] · down_e h[t, j], split by output rows (so
// one row, decode, uses every thread too); within a split each expert's
// rows meet all the window's rows routed to it, and the sum over j then
// runs in j order.
func moeDown(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	eb := a.expertBlock()
	K := a.int(graph.ConstTopK)
	H, I := eb.hidden, eb.inter
	// parts 1: y[t] sums the row's experts; top_k (a prefill window): y[t, j]
	// is expert j's weighted output, summed by moe_combine.
	parts := a.int(graph.ConstParts)
	h, ids, w, y := a.f32n("h", p.max*K*I), a.u32("ids"), a.f32n("weights", p.max*K), a.f32n("y", p.max*parts*H)
	names := a.downNames(eb)
	pl := a.pool
	var groups []expertGroup
	var ds downScratch
	return func() {
		n := p.rows()
		groups = groupByExpert(ids[:n*K], eb.experts, groups)
		buf := scratch.Get().(*[]float32)
		if cap(*buf) < n*K*H {
			*buf = make([]float32, n*K*H)
		}
		vals := (*buf)[:n*K*H] // down_e h[t, j], by tj
		defer scratch.Put(buf)
		done := ds.done(n * K)
		downGroups(pl, eb, K, h, groups, names, vals, done, &ds)
		weighDown(pl, parts, K, H, n, w, vals, done, y)
	}, a.err
}

// downNames is the down tensor's name, for an Observer.
func (a *args) downNames(eb expertBlock) []string {
	return []string{a.tensorName("experts", int(a.expertBase[a.d.Layer])+eb.downOff)}
}

// downScratch is what downGroups reuses from call to call.
type downScratch struct {
	order, starts []int
	resident      []bool
}

// done is a cleared flag per pair, n of them.
func (ds *downScratch) done(n int) []bool {
	if cap(ds.resident) < n {
		ds.resident = make([]bool, n)
	}
	ds.resident = ds.resident[:n]
	clear(ds.resident)
	return ds.resident
}

// downGroups computes vals[tj] = down_e h[tj] for the pairs of each group
// (expert e) and marks them in done; a group whose expert smap says is
// not resident is skipped (a guard: the host makes them resident).
func downGroups(pl *pool, eb expertBlock, K int, h []float32, groups []expertGroup, names []string, vals []float32, done []bool, ds *downScratch) {
	H, I := eb.hidden, eb.inter
	if o := currentObserver(); o != nil {
		for _, g := range groups {
			observeGroup(o, names, g.e, eb.experts, I, K, h, g.tjs, true)
		}
	}
	// the rows in expert order: each expert's rows at one stride
	order, starts := ds.order[:0], ds.starts[:0]
	for _, g := range groups {
		starts = append(starts, len(order))
		order = append(order, g.tjs...)
		if _, ok := eb.matrix(g.e, eb.downOff, eb.down, H); ok {
			for _, tj := range g.tjs {
				done[tj] = true
			}
		}
	}
	ds.order, ds.starts = order, starts
	hs := newActRowsSel(h, order, I, eb.down)
	defer hs.release()
	pl.parallel(H, len(order)*I, func(lo, hi int) {
		var yoff []int
		for gi, g := range groups {
			down, ok := eb.matrix(g.e, eb.downOff, eb.down, H)
			if !ok {
				continue
			}
			if hs.ar != nil && len(g.tjs) >= tileRows {
				yoff = yoff[:0]
				for _, tj := range g.tjs {
					yoff = append(yoff, tj*H)
				}
				act8Tile(hs.k8[0], down, lo, hi, hs.ar, starts[gi], vals, yoff)
				continue
			}
			for t, tj := range g.tjs {
				hs.dotRows(down, 0, lo, starts[gi]+t, vals[tj*H+lo:tj*H+hi])
			}
		}
	})
}

// weighDown writes y from the n rows' values (vals, done as downGroups
// left them) and weights w: parts 1, y[t] = Σ_j w[t, j]·vals[t, j] in j
// order; parts top-k, y[t, j] = w[t, j]·vals[t, j]. A pair not done
// counts zero.
func weighDown(pl *pool, parts, K, H, n int, w, vals []float32, done []bool, y []float32) {
	pl.parallel(H, n*K, func(lo, hi int) {
		if parts > 1 {
			for tj := 0; tj < n*K; tj++ {
				for o := lo; o < hi; o++ {
					v := 0.0
					if done[tj] {
						v = float64(w[tj]) * float64(vals[tj*H+o])
					}
					y[tj*H+o] = float32(v)
				}
			}
			return
		}
		for t := 0; t < n; t++ {
			for o := lo; o < hi; o++ {
				var acc float64
				for j := 0; j < K; j++ {
					if done[t*K+j] {
						acc += float64(w[t*K+j]) * float64(vals[(t*K+j)*H+o])
					}
				}
				y[t*H+o] = float32(acc)
			}
		}
	})
}

// moeCombine: x (+)= routed + sigmoid(shared_gate)·shared; added to x for a
// plain residual, written for a hyper-connection inject.
func moeCombine(d *graph.Dispatch, a *args) (func(), error) {
	p := a.params()
	dim := a.int(graph.ConstDim)
	hasShared := a.int(graph.ConstShared) != 0
	add := a.int(graph.ConstAdd) != 0
	parts := a.int(graph.ConstParts) // routed outputs per row, summed in rank order
	x, routed := a.f32n("x", p.max*dim), a.f32n("routed", p.max*parts*dim)
	var shared, sg []float32
	if hasShared {
		shared, sg = a.f32n("shared", p.max*dim), a.f32n("shared_gate", p.max)
	}
	return func() {
		for t := 0; t < p.rows(); t++ {
			gate := 0.0
			if hasShared {
				gate = sigmoid(float64(sg[t]))
			}
			for i := t * dim; i < (t+1)*dim; i++ {
				mlp := 0.0
				for j := i - t*dim + t*parts*dim; j < (t+1)*parts*dim; j += dim {
					mlp += float64(routed[j])
				}
				if hasShared {
					mlp = float64(float32(mlp + float64(float32(gate*float64(shared[i])))))
				}
				if add {
					x[i] = float32(float64(x[i]) + mlp)
				} else {
					x[i] = float32(mlp)
				}
			}
		}
	}, a.err
}
