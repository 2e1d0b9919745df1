package quant

import "math"

//go:generate go run -C asm/act8 . -out ../../act8_amd64.s -stubs ../../act8_amd64_decl.go -pkg quant

// Act8 is an activation row quantized to int8 for integer block dots, as
// ggml quantizes activations (its q8_0 / q8_K) before vec_dot: blocks of
// Act8Block values, each with one float32 scale D = max|x|/127 (max over
// the block, or by Quantize256 over its 256) and levels Q = round(x/D) in
// [−127, 127]. Quantize pads the row with zeros to a
// whole number of 256 values, so every format's blocks (and a padded row's
// tail) meet whole activation blocks.
//
// The integer dot of a weight row with it is exact in the levels: it
// equals Σ w[i]·x̂[i] for x̂ = Dequantize() up to float32 reassociation,
// and so differs from Σ w[i]·x[i] by Σ w[i]·(x̂[i]−x[i]), |x̂−x| ≤ D/2 per
// value: at most Σ_blocks (D_b/2)·Σ_{i∈b}|w[i]| (≈ 0.4% of Σ|w|·max|x| per
// block, and far less on average, the rounding errors being of both signs).
type Act8 struct {
	Q []int8
	D []float32
	// S holds D·ΣQ per block: Σ x̂ over the block, for the formats whose
	// weights carry an offset (q4_K's mins).
	S []float32
	// H holds D·ΣQ per 16 values (two per block): the offsets of q2_K's
	// mins and q3_K's −4 per 16 values meet them.
	H []float32
	// G holds ΣQ per 16 values as integers (two per block, |ΣQ| ≤ 2032):
	// the one-row kernels of q2_K, q3_K and q6_K weigh them by the
	// offsets' integer factors with one VPMADDWD per 256 values.
	G []int16
	n int
	// wide: quantized by Quantize256, one scale per 256 values.
	wide bool
}

// Act8Block is the number of values that share one activation scale.
const Act8Block = 32

const act8Pad = 256

// Len is the number of values quantized (before padding).
func (a *Act8) Len() int { return a.n }

// Quantize fills a with x, reusing a's storage.
func (a *Act8) Quantize(x []float32) {
	nb := a.size(len(x))
	a.wide = false
	for b := range nb {
		lo := b * Act8Block
		q := a.Q[lo : lo+Act8Block]
		if lo >= len(x) {
			a.zero(b, 0)
			continue
		}
		xs := x[lo:min(len(x), lo+Act8Block)]
		if len(xs) == Act8Block && quantize32 != nil && quantize32(&xs[0], &q[0], &a.D[b], &a.S[b], &a.H[2*b], &a.G[2*b]) {
			continue
		}
		quantizeAct8Block(xs, q, &a.D[b], &a.S[b], (*[2]float32)(a.H[2*b:]), (*[2]int16)(a.G[2*b:]))
	}
}

// Quantize256 fills a with x as Quantize does, but with one scale per 256
// values (as ggml's q8_K): every block of 32 of a 256 takes D =
// max|x|/127 over the 256 (D, S, H and G stay per block and per 16, so
// every kernel reads them as it reads Quantize's). The levels' rounding is
// coarser where a block's max|x| is below its 256's (|x̂ − x| ≤ D/2 with
// the 256's D); the formats with a scale per 32 in their weights that
// have an eight-row kernel for these (Act8Dot.Scale256) run it with one
// conversion and multiply-add per 256 values and row rather than per 32.
// A NaN or infinity anywhere in a 256 makes its eight scales NaN.
func (a *Act8) Quantize256(x []float32) {
	nb := a.size(len(x))
	a.wide = true
	const per = act8Pad / Act8Block
	for g := 0; g < nb; g += per {
		lo := g * Act8Block
		if lo >= len(x) {
			for b := g; b < g+per; b++ {
				a.zero(b, 0)
			}
			continue
		}
		xg := x[lo:min(len(x), lo+act8Pad)]
		var amax uint32
		if len(xg) == act8Pad && absMax256 != nil {
			amax = absMax256(&xg[0])
		} else {
			amax = absMaxBits(xg)
		}
		for b := g; b < g+per; b++ {
			blo := b * Act8Block
			q := a.Q[blo : blo+Act8Block]
			if blo >= len(x) {
				a.zero(b, scaleOf(amax))
				continue
			}
			xs := x[blo:min(len(x), blo+Act8Block)]
			if len(xs) == Act8Block && quantize32Max != nil && quantize32Max(&xs[0], &q[0], &a.D[b], &a.S[b], &a.H[2*b], &a.G[2*b], amax) {
				continue
			}
			quantizeAct8BlockMax(xs, q, &a.D[b], &a.S[b], (*[2]float32)(a.H[2*b:]), (*[2]int16)(a.G[2*b:]), amax)
		}
	}
}

// Wide reports whether a was quantized by Quantize256.
func (a *Act8) Wide() bool { return a.wide }

// scaleOf is the scale D of a 256 whose max|x| has the float32 bits
// amax, as quantizeAct8BlockMax sets it (0 for 0, NaN where not finite).
func scaleOf(amax uint32) float32 {
	switch {
	case amax == 0:
		return 0
	case amax >= 0x7f800000:
		return float32(math.NaN())
	}
	return math.Float32frombits(amax) / 127
}

// zero sets block b to zero levels and sums, with scale d.
func (a *Act8) zero(b int, d float32) {
	clear(a.Q[b*Act8Block : (b+1)*Act8Block])
	a.D[b], a.S[b] = d, 0
	a.H[2*b], a.H[2*b+1] = 0, 0
	a.G[2*b], a.G[2*b+1] = 0, 0
}

// absMaxBits is the largest |x| of xs as float32 bits: for finite values
// and +Inf the bits order as the values, and any NaN's lie above +Inf's.
func absMaxBits(xs []float32) uint32 {
	var amax uint32
	for _, v := range xs {
		amax = max(amax, math.Float32bits(v)&^(1<<31))
	}
	return amax
}

// size sizes a for a row of k values (padded to whole 256s) and returns
// its number of blocks.
func (a *Act8) size(k int) int {
	a.n = k
	n := (k + act8Pad - 1) / act8Pad * act8Pad
	nb := n / Act8Block
	if cap(a.Q) < n {
		a.Q = make([]int8, n)
	}
	if cap(a.D) < nb {
		a.D, a.S = make([]float32, nb), make([]float32, nb)
	}
	if cap(a.H) < 2*nb {
		a.H, a.G = make([]float32, 2*nb), make([]int16, 2*nb)
	}
	a.Q, a.D, a.S, a.H, a.G = a.Q[:n], a.D[:nb], a.S[:nb], a.H[:2*nb], a.G[:2*nb]
	return nb
}

// quantize32 is quantizeAct8Block of one whole block of finite values
// not all zero in assembly (nil where there is none), false where it
// leaves the block to quantizeAct8Block.
var quantize32 func(x *float32, q *int8, d, s, h *float32, g *int16) bool

// quantize32Max is quantizeAct8BlockMax of one whole block in assembly
// (nil where there is none), false where amax is 0, below 2^-119 or not
// finite (left to quantizeAct8BlockMax); absMax256 is absMaxBits of 256
// values in assembly.
var (
	quantize32Max func(x *float32, q *int8, d, s, h *float32, g *int16, amax uint32) bool
	absMax256     func(x *float32) uint32
)

func quantizeAct8Block(xs []float32, q []int8, d, s *float32, h *[2]float32, g *[2]int16) {
	quantizeAct8BlockMax(xs, q, d, s, h, g, absMaxBits(xs))
}

// quantizeAct8BlockMax quantizes the block xs with the scale of max|x| =
// amax (float32 bits, ≥ every |x| of xs): the block's own (Quantize) or
// its 256's (Quantize256).
func quantizeAct8BlockMax(xs []float32, q []int8, d, s *float32, h *[2]float32, g *[2]int16, amax uint32) {
	*g = [2]int16{}
	if amax == 0 {
		clear(q)
		*d, *s, h[0], h[1] = 0, 0, 0, 0
		return
	}
	if amax >= 0x7f800000 { // NaN or ±Inf: no levels carry it; a NaN scale makes the dot NaN
		clear(q)
		nan := float32(math.NaN())
		*d, *s, h[0], h[1] = nan, nan, nan, nan
		return
	}
	m := math.Float32frombits(amax)
	dd := m / 127
	id := 127 / m
	var sum [2]int32
	for i, v := range xs {
		// round half away from zero (ggml's roundf); |v·id| ≤ 127 (+ rounding)
		f := v * id
		var l int32
		if f >= 0 {
			l = min(127, int32(f+0.5))
		} else {
			l = max(-127, int32(f-0.5))
		}
		q[i] = int8(l)
		sum[i/16] += l
	}
	clear(q[len(xs):])
	*d, *s = dd, dd*float32(sum[0]+sum[1])
	h[0], h[1] = dd*float32(sum[0]), dd*float32(sum[1])
	g[0], g[1] = int16(sum[0]), int16(sum[1])
}

// Dequantize returns x̂: D·Q per block, over the Len values.
func (a *Act8) Dequantize() []float32 {
	out := make([]float32, a.n)
	for i := range out {
		out[i] = a.D[i/Act8Block] * float32(a.Q[i])
	}
	return out
}

// act8Func is a format's integer dot of whole blocks (block holding nblk
// of them) with the activation levels and scales from q, d, s, h, g (its
// first nblk·BlockElems values).
type act8Func = func(block []byte, q []int8, d, s, h []float32, g []int16, nblk int) float32

// act8x4Func is a format's four-row dot of whole blocks: out[i][r] is the
// dot of the weight row at data[i·stride:] (nblk blocks) with a[r], for
// i < len(out); rows not at equal strides take one-row dots.
type act8x4Func = func(data []byte, stride int, a *[4]*Act8, nblk int, out [][4]float32)

// act8RowsFunc is a format's one-row dot over a run of weight rows:
// out[i] is the dot of the row at data[i·stride:] (nblk blocks) with the
// activation, i < len(out), in one call.
type act8RowsFunc = func(data []byte, stride int, q []int8, d, s, h []float32, g []int16, nblk int, out []float32)

// act8x2Func and act8x8Func are act8x4Func for two and eight activation
// rows.
type (
	act8x2Func = func(data []byte, stride int, a *[2]*Act8, nblk int, out [][2]float32)
	act8x8Func = func(data []byte, stride int, a *[8]*Act8, nblk int, out [][8]float32)
)

var (
	act8Dots     = map[*Format]act8Func{}
	act8DotsRows = map[*Format]act8RowsFunc{}
	act8Dots2    = map[*Format]act8x2Func{}
	act8Dots4    = map[*Format]act8x4Func{}
	act8Dots8    = map[*Format]act8x8Func{}
	// act8Tail8 is, per format with an eight-row kernel, the fewest rows
	// for which one eight-row call (borrowing the rest) costs less than a
	// four-row call and two- or one-row calls (Act8Dot.Tail8); 5 where
	// absent.
	act8Tail8 = map[*Format]int{}
	// act8Wide marks the formats whose eight-row kernel has a version for
	// rows quantized with one scale per 256 (Act8Dot.Scale256).
	act8Wide = map[*Format]bool{}
)

func init() {
	for name, f := range archAct8() {
		act8Dots[registry[name]] = f
	}
	for name, f := range archAct8x4() {
		act8Dots4[registry[name]] = f
	}
	for name, f := range archAct8Rows() {
		act8DotsRows[registry[name]] = f
	}
	for name, f := range archAct8x8() {
		act8Dots8[registry[name]] = f
		// q8_0, q4_k, q5_k: a weight row of 2048 values in cache, this
		// EPYC, ns per call of one, two, four and eight rows: q4_k 74,
		// 121, 187, 335; q8_0 82, 127, 213, 394; q5_k 89, 131, 200, 343.
		// Five and six rows go cheaper as four and one or two (the grid IQ
		// formats' decode makes their small calls dearer: iq2_xxs 178,
		// 207, 303, 460, so five rows borrow three).
		act8Tail8[registry[name]] = 7
	}
	for name, f := range archAct8x2() {
		act8Dots2[registry[name]] = f
	}
	for name, w := range archAct8Wide() {
		registerWide(registry[name], w)
	}
}

// wideKernels are a format's two-, four- and eight-row kernels for rows
// quantized by Quantize256 (one scale per 256 values).
type wideKernels struct {
	two   act8x2Func
	four  act8x4Func
	eight act8x8Func
}

// registerWide puts f's kernels for Quantize256's rows beside its
// two-, four- and eight-row kernels (registered before): each then runs
// the wide one where all its rows are such, else the one it had.
func registerWide(f *Format, w wideKernels) {
	two, four, eight := act8Dots2[f], act8Dots4[f], act8Dots8[f]
	act8Dots2[f] = func(data []byte, stride int, a *[2]*Act8, nb int, out [][2]float32) {
		if allWide(a[:]) {
			w.two(data, stride, a, nb, out)
		} else {
			two(data, stride, a, nb, out)
		}
	}
	act8Dots4[f] = func(data []byte, stride int, a *[4]*Act8, nb int, out [][4]float32) {
		if allWide(a[:]) {
			w.four(data, stride, a, nb, out)
		} else {
			four(data, stride, a, nb, out)
		}
	}
	act8Dots8[f] = func(data []byte, stride int, a *[8]*Act8, nb int, out [][8]float32) {
		if allWide(a[:]) {
			w.eight(data, stride, a, nb, out)
		} else {
			eight(data, stride, a, nb, out)
		}
	}
	act8Wide[f] = true
	// the wide eight-row kernel costs about 3/4 of the other, so that a
	// tile's tail of five or more rows fills one (Tail8)
	act8Tail8[f] = 5
}

// allWide reports whether every row of a was quantized by Quantize256.
func allWide(a []*Act8) bool {
	for _, r := range a {
		if !r.wide {
			return false
		}
	}
	return true
}

// Act8Kernel is r's integer dot with quantized activations, ok false where
// the format has no such kernel on this machine (its rows then go through
// Dot32 with float32 activations). Look it up once per matrix, not per row.
func (r RowLayout) Act8Kernel() (Act8Dot, bool) {
	f, ok := act8Dots[r.Format]
	if !ok {
		return Act8Dot{}, false
	}
	tail8, ok := act8Tail8[r.Format]
	if !ok {
		tail8 = 5
	}
	return Act8Dot{r: r, one: f, rows: act8DotsRows[r.Format], two: act8Dots2[r.Format], four: act8Dots4[r.Format], eight: act8Dots8[r.Format],
		tail8: tail8, wide: act8Wide[r.Format]}, true
}

// Scale256 reports whether the format's eight-row kernel runs faster on
// activations quantized by Quantize256 (one scale per 256 values): it then
// takes one conversion and multiply-add per 256 values and row where
// Quantize's rows take one per 32. Every kernel takes either kind of rows.
func (k Act8Dot) Scale256() bool { return k.wide }

// Act8Dot multiplies stored rows of one layout with Act8 activations.
type Act8Dot struct {
	r     RowLayout
	one   act8Func
	rows  act8RowsFunc // nil: DotRows calls one per row
	two   act8x2Func
	four  act8x4Func
	eight act8x8Func
	tail8 int
	wide  bool // the eight-row kernel has a version for Quantize256's rows
}

// Dot is Σ DecodeRow(row)[i]·x̂[i] over the row's stored values (the
// padding meets the activation's zero padding); a must hold a row of at
// least r.Len values quantized by Quantize.
func (k Act8Dot) Dot(row []byte, a *Act8) float32 {
	nb := k.r.Stored / k.r.Format.BlockElems
	n := nb * k.r.Format.BlockElems
	return k.one(row, a.Q[:n], a.D[:n/Act8Block], a.S[:n/Act8Block], a.H[:2*n/Act8Block], a.G[:2*n/Act8Block], nb)
}

// DotRows sets out[i] to Dot of the row at data[i·stride:] for every i:
// consecutive rows of one matrix, in one call.
func (k Act8Dot) DotRows(data []byte, stride int, a *Act8, out []float32) {
	nb := k.r.Stored / k.r.Format.BlockElems
	n := nb * k.r.Format.BlockElems
	q, d, s, h, g := a.Q[:n], a.D[:n/Act8Block], a.S[:n/Act8Block], a.H[:2*n/Act8Block], a.G[:2*n/Act8Block]
	if k.rows != nil {
		k.rows(data, stride, q, d, s, h, g, nb, out)
		return
	}
	for i := range out {
		out[i] = k.one(data[i*stride:], q, d, s, h, g, nb)
	}
}

// HasDot4 reports whether Dot4 runs a four-row kernel (each block loaded
// once for the four) rather than four Dots.
func (k Act8Dot) HasDot4() bool { return k.four != nil }

// Dot4 is Dot for four activation rows, through a four-row kernel where
// the format has one.
func (k Act8Dot) Dot4(row []byte, a *[4]*Act8, out *[4]float32) {
	if k.four != nil {
		o := [1][4]float32{}
		k.four(row, 0, a, k.r.Stored/k.r.Format.BlockElems, o[:])
		*out = o[0]
		return
	}
	for i, ai := range a {
		out[i] = k.Dot(row, ai)
	}
}

// DotRows4 sets out[i] to Dot4 of the row at data[i·stride:] for every i:
// consecutive rows of one matrix with the same four activation rows, in
// one call (the rows' strides checked once).
func (k Act8Dot) DotRows4(data []byte, stride int, a *[4]*Act8, out [][4]float32) {
	if len(out) == 0 {
		return
	}
	if k.four != nil {
		k.four(data, stride, a, k.r.Stored/k.r.Format.BlockElems, out)
		return
	}
	for i := range out {
		for r, ar := range a {
			out[i][r] = k.Dot(data[i*stride:], ar)
		}
	}
}

// HasDot2 reports whether DotRows2 runs a two-row kernel (each block's
// weights decoded once for the two) rather than one-row dots.
func (k Act8Dot) HasDot2() bool { return k.two != nil }

// DotRows2 is DotRows4 for two activation rows: through the format's
// two-row kernel where it has one, else one-row dots.
func (k Act8Dot) DotRows2(data []byte, stride int, a *[2]*Act8, out [][2]float32) {
	if len(out) == 0 {
		return
	}
	if k.two != nil {
		k.two(data, stride, a, k.r.Stored/k.r.Format.BlockElems, out)
		return
	}
	for i := range out {
		for r, ar := range a {
			out[i][r] = k.Dot(data[i*stride:], ar)
		}
	}
}

// HasDot8 reports whether DotRows8 runs an eight-row kernel (each block's
// weights decoded once for the eight) rather than four-row ones.
func (k Act8Dot) HasDot8() bool { return k.eight != nil }

// Tail8 is the fewest rows (5 to 8) a tile's tail should fill an
// eight-row call with, borrowing the rest, rather than take a four-row
// call and smaller ones: where the format's small calls cost little
// against its eight-row one, the tail of five or six goes as four and one
// or two.
func (k Act8Dot) Tail8() int { return k.tail8 }

// Dot8 is Dot for eight activation rows, through an eight-row kernel
// where the format has one.
func (k Act8Dot) Dot8(row []byte, a *[8]*Act8, out *[8]float32) {
	o := [1][8]float32{}
	k.DotRows8(row, 0, a, o[:])
	*out = o[0]
}

// DotRows8 is DotRows4 for eight activation rows: through the format's
// eight-row kernel where it has one (its version for Quantize256's rows
// where all eight are such and the format has it), else two four-row
// calls per row.
func (k Act8Dot) DotRows8(data []byte, stride int, a *[8]*Act8, out [][8]float32) {
	if len(out) == 0 {
		return
	}
	if k.eight != nil {
		k.eight(data, stride, a, k.r.Stored/k.r.Format.BlockElems, out)
		return
	}
	for i := range out {
		var o [4]float32
		for h := range 2 {
			k.Dot4(data[i*stride:], (*[4]*Act8)(a[4*h:]), &o)
			copy(out[i][4*h:], o[:])
		}
	}
}

// Act8Rows quantizes rows of one width into one buffer, row r at a fixed
// stride from row 0, so four-row kernels step between rows by a stride.
type Act8Rows struct {
	all  Act8
	rows []Act8
}

// Quantize fills a with the rows x[r·k : (r+1)·k], r < rows.
func (a *Act8Rows) Quantize(x []float32, rows, k int) {
	a.reserve(rows, k)
	for r := range rows {
		a.rows[r].Quantize(x[r*k : (r+1)*k])
	}
}

// Quantize256 is Quantize with Act8.Quantize256 (one scale per 256
// values).
func (a *Act8Rows) Quantize256(x []float32, rows, k int) {
	a.reserve(rows, k)
	for r := range rows {
		a.rows[r].Quantize256(x[r*k : (r+1)*k])
	}
}

// QuantizeSel256 is QuantizeSel with Act8.Quantize256.
func (a *Act8Rows) QuantizeSel256(x []float32, k int, sel []int) {
	a.reserve(len(sel), k)
	for i, r := range sel {
		a.rows[i].Quantize256(x[r*k : (r+1)*k])
	}
}

// QuantizeSel fills a with the rows x[sel[i]·k : (sel[i]+1)·k], i <
// len(sel): a window's rows in another order (grouped by the expert they
// route to), so that each group's rows lie at one stride for the four-row
// kernels.
func (a *Act8Rows) QuantizeSel(x []float32, k int, sel []int) {
	a.reserve(len(sel), k)
	for i, r := range sel {
		a.rows[i].Quantize(x[r*k : (r+1)*k])
	}
}

// Gather fills a with copies of src's rows sel[i], i < len(sel) (levels,
// scales and sums): rows quantized once, regrouped at one stride.
func (a *Act8Rows) Gather(src *Act8Rows, sel []int) {
	k := 0
	if len(src.rows) > 0 {
		k = src.rows[0].n
	}
	a.reserve(len(sel), k)
	for i, r := range sel {
		s, d := &src.rows[r], &a.rows[i]
		copy(d.Q, s.Q)
		copy(d.D, s.D)
		copy(d.S, s.S)
		copy(d.H, s.H)
		copy(d.G, s.G)
		d.n, d.wide = s.n, s.wide
	}
}

// reserve sizes a for rows rows of k values and points the rows' views
// into its buffer, row r at r times the padded width.
func (a *Act8Rows) reserve(rows, k int) {
	w := (k + act8Pad - 1) / act8Pad * act8Pad
	nb := w / Act8Block
	all := &a.all
	if cap(all.Q) < rows*w {
		all.Q = make([]int8, rows*w)
	}
	if cap(all.D) < rows*nb {
		all.D, all.S = make([]float32, rows*nb), make([]float32, rows*nb)
	}
	if cap(all.H) < 2*rows*nb {
		all.H, all.G = make([]float32, 2*rows*nb), make([]int16, 2*rows*nb)
	}
	all.Q, all.D, all.S, all.H, all.G = all.Q[:rows*w], all.D[:rows*nb], all.S[:rows*nb], all.H[:2*rows*nb], all.G[:2*rows*nb]
	if cap(a.rows) < rows {
		a.rows = make([]Act8, rows)
	}
	a.rows = a.rows[:rows]
	for r := range rows {
		ar := &a.rows[r]
		ar.Q, ar.D, ar.S = all.Q[r*w:(r+1)*w:(r+1)*w], all.D[r*nb:(r+1)*nb:(r+1)*nb], all.S[r*nb:(r+1)*nb:(r+1)*nb]
		ar.H = all.H[2*r*nb : 2*(r+1)*nb : 2*(r+1)*nb]
		ar.G = all.G[2*r*nb : 2*(r+1)*nb : 2*(r+1)*nb]
		ar.n = k
	}
}

// Rows is the number of rows a holds.
func (a *Act8Rows) Rows() int { return len(a.rows) }

// Row is row r, valid until the next Quantize.
func (a *Act8Rows) Row(r int) *Act8 { return &a.rows[r] }
