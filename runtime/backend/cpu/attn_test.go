package cpu

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// The attention kernels (AVX2 where hd allows) equal their Go versions to
// the bit, at tiles of one to seven queries and one to nine keys, head
// widths on and off the kernels' 16- and 4-element steps and strides past
// hd; and both are the plain float64 sums to rounding.
func TestAttnKernels(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for _, hd := range []int{4, 8, 12, 20, 64, 256, 6} {
		for _, nq := range []int{1, 2, 3, 4, 7} {
			for _, n := range []int{1, 3, 4, 9} {
				qs, ks, os := hd+4, 3*hd+8, n+5
				q := make([]float64, nq*qs)
				for i := range q {
					q[i] = rng.NormFloat64()
				}
				k := make([]float32, n*ks)
				for i := range k {
					k[i] = float32(rng.NormFloat64())
				}
				got, want := make([]float64, nq*os), make([]float64, nq*os)
				attnQK(q, qs, k, ks, got, os, nq, n, hd)
				attnQKGo(q, qs, k, ks, want, os, nq, n, hd)
				for r := range nq {
					for j := range n {
						var d, mag float64
						for i := range hd {
							d += q[r*qs+i] * float64(k[j*ks+i])
							mag += math.Abs(q[r*qs+i] * float64(k[j*ks+i]))
						}
						g, w := got[r*os+j], want[r*os+j]
						if g != w || math.Abs(w-d) > 1e-14*mag {
							t.Fatalf("hd %d, %d×%d: dot (%d, %d) %v, Go %v, plain %v", hd, nq, n, r, j, g, w, d)
						}
					}
				}
				ws := n + 3
				w := make([]float64, nq*ws)
				for i := range w {
					w[i] = rng.Float64()
				}
				acc, ref := make([]float64, nq*qs), make([]float64, nq*qs)
				for i := range acc {
					acc[i] = rng.NormFloat64()
				}
				copy(ref, acc)
				plain := slices.Clone(acc)
				attnPV(acc, qs, k, ks, w, ws, nq, n, hd)
				attnPVGo(ref, qs, k, ks, w, ws, nq, n, hd)
				for r := range nq {
					for i := range qs {
						var s, mag float64 = plain[r*qs+i], math.Abs(plain[r*qs+i])
						if i < hd {
							for j := range n {
								s += w[r*ws+j] * float64(k[j*ks+i])
								mag += math.Abs(w[r*ws+j] * float64(k[j*ks+i]))
							}
						}
						if acc[r*qs+i] != ref[r*qs+i] || math.Abs(ref[r*qs+i]-s) > 1e-14*mag {
							t.Fatalf("hd %d, %d×%d: sum (%d, %d) %v, Go %v, plain %v", hd, nq, n, r, i, acc[r*qs+i], ref[r*qs+i], s)
						}
					}
				}
			}
		}
	}
}

// attnShape is an attention layer's shape for the tile tests.
type attnShape struct {
	heads, kvHeads, hd int
	gated              bool
}

// runAttention runs one window of the attention dispatch (rows rows from
// position pos) on h's threads over the cache kc, vc (ctx rows) and returns y.
func runAttention(t testing.TB, h *Host, s attnShape, ctx, pos, rows int, q, qfull, kc, vc []float32) []float32 {
	t.Helper()
	p, mem := attentionProgram(t, h, s, ctx, pos, rows, q, qfull, kc, vc)
	p.Run()
	return slices.Clone(backend.Float32s(mem.Buffer("y")))
}

// attentionProgram compiles runAttention's window.
func attentionProgram(t testing.TB, h *Host, s attnShape, ctx, pos, rows int, q, qfull, kc, vc []float32) (*Program, *backend.HostMemory) {
	t.Helper()
	qStride := s.hd
	if s.gated {
		qStride = 2 * s.hd
	}
	gate := int64(0)
	if s.gated {
		gate = 1
	}
	kvDim := s.kvHeads * s.hd
	sizes := map[string]int{"q": rows * s.heads * s.hd, "qfull": rows * s.heads * qStride, "kcache": ctx * kvDim, "vcache": ctx * kvDim, "y": rows * s.heads * s.hd}
	g := &graph.Graph{Model: "attention-test", Kind: graph.KindTrunk, Rows: rows, Buffers: []graph.Buffer{{Name: "params", Kind: graph.KindParams, Size: 64}}}
	d := graph.Dispatch{Kernel: "attention", Family: graph.FamilyAttention,
		Consts: []graph.Const{{Name: graph.ConstRows, Value: int64(rows)}, {Name: graph.ConstHeads, Value: int64(s.heads)}, {Name: graph.ConstKVHeads, Value: int64(s.kvHeads)},
			{Name: graph.ConstHeadDim, Value: int64(s.hd)}, {Name: graph.ConstRotDim, Value: int64(s.hd)}, {Name: graph.ConstCtx, Value: int64(ctx)}, {Name: graph.ConstGate, Value: gate},
			{Name: graph.ConstSparse, Value: 0}, {Name: graph.ConstRatio, Value: 1}, {Name: graph.ConstTopK, Value: 1}},
		Args: []graph.Binding{{Name: "params", Access: graph.Read, Range: graph.Range{Buffer: "params", Size: 64}}}}
	for _, name := range []string{"q", "qfull", "kcache", "vcache", "y"} {
		g.Buffers = append(g.Buffers, graph.Buffer{Name: name, Kind: graph.KindScratch, Size: int64(4 * sizes[name])})
		access := graph.Read
		if name == "y" {
			access = graph.Write
		}
		d.Args = append(d.Args, graph.Binding{Name: name, Access: access, Range: graph.Range{Buffer: name, Size: int64(4 * sizes[name])}})
	}
	g.Dispatches = []graph.Dispatch{d}
	mem, err := backend.NewHostMemory(g)
	if err != nil {
		t.Fatal(err)
	}
	par := backend.Uint32s(mem.Buffer("params"))
	par[graph.ParamRowsWord], par[graph.ParamPosWord] = uint32(rows), uint32(pos)
	copy(backend.Float32s(mem.Buffer("q")), q)
	copy(backend.Float32s(mem.Buffer("qfull")), qfull)
	copy(backend.Float32s(mem.Buffer("kcache")), kc)
	copy(backend.Float32s(mem.Buffer("vcache")), vc)
	p, err := h.CompileHost(g, mem)
	if err != nil {
		t.Fatal(err)
	}
	return p, mem
}

// BenchmarkAttention: one thread, Qwen3-Next's attention shape, a window of
// 64 rows (prefill) and of one row (decode) at depth 4032; ns/op is one
// window, and the report is ns per row, query head and key.
func BenchmarkAttention(b *testing.B) {
	s := attnShape{16, 2, 256, true}
	const ctx, pos = 4096, 4032
	rng := rand.New(rand.NewSource(1))
	fill := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return v
	}
	kc, vc := fill(ctx*s.kvHeads*s.hd), fill(ctx*s.kvHeads*s.hd)
	h := New(1)
	for _, rows := range []int{64, 1} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) {
			p, _ := attentionProgram(b, h, s, ctx, pos, rows, fill(rows*s.heads*s.hd), fill(rows*s.heads*2*s.hd), kc, vc)
			for b.Loop() {
				p.Run()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(rows*s.heads*(pos+rows/2)), "ns/row·head·key")
		})
	}
}

// attentionRef is causal GQA softmax attention written out plainly in
// float64, the independent reference: for row t (position pos+t) and query
// head h, softmax over j ≤ pos+t of q·k_j/√hd, times the values, times
// sigmoid of the gate when gated. mag is Σ_j p_j·|v_j| per output.
func attentionRef(s attnShape, pos, rows int, q, qfull, kc, vc []float32) (want, mag []float64) {
	kvDim, group := s.kvHeads*s.hd, s.heads/s.kvHeads
	want, mag = make([]float64, rows*s.heads*s.hd), make([]float64, rows*s.heads*s.hd)
	for t := range rows {
		for h := range s.heads {
			kvh := h / group
			qh := q[(t*s.heads+h)*s.hd:][:s.hd]
			p := make([]float64, pos+t+1)
			mx := math.Inf(-1)
			for j := range p {
				for i := range s.hd {
					p[j] += float64(qh[i]) * float64(kc[j*kvDim+kvh*s.hd+i])
				}
				p[j] /= math.Sqrt(float64(s.hd))
				mx = max(mx, p[j])
			}
			var z float64
			for j := range p {
				p[j] = math.Exp(p[j] - mx)
				z += p[j]
			}
			o := (t*s.heads + h) * s.hd
			for i := range s.hd {
				for j := range p {
					v := float64(vc[j*kvDim+kvh*s.hd+i])
					want[o+i] += p[j] / z * v
					mag[o+i] += p[j] / z * math.Abs(v)
				}
				if s.gated {
					g := 1 / (1 + math.Exp(-float64(qfull[(t*s.heads+h)*2*s.hd+s.hd+i])))
					want[o+i] *= g
					mag[o+i] *= g
				}
			}
		}
	}
	return want, mag
}

// tileOutputs is attention over rows rows from position pos in float64,
// before the dispatch rounds it to float32: attnTile on tiles of tile rows.
func tileOutputs(s attnShape, pos, rows, tile int, q, kc, vc []float32) []float64 {
	group, kvDim := s.heads/s.kvHeads, s.kvHeads*s.hd
	out := make([]float64, rows*s.heads*s.hd)
	for kvh := range s.kvHeads {
		for t0 := 0; t0 < rows; t0 += tile {
			r := min(tile, rows-t0)
			sc := getAttnScratch(r, r*group, pos+rows, s.hd)
			for rr := range r {
				for g := range group {
					for i := range s.hd {
						sc.qd[(rr*group+g)*s.hd+i] = float64(q[((t0+rr)*s.heads+kvh*group+g)*s.hd+i])
					}
				}
				sc.nv[rr] = pos + t0 + rr + 1
			}
			keys := sc.keys[:0]
			for k := range pos + t0 + r {
				keys = append(keys, k)
			}
			attnTile(sc.acc, sc.qd, r, group, s.hd, keys, sc.nv, kc[kvh*s.hd:], vc[kvh*s.hd:], kvDim, 1/math.Sqrt(float64(s.hd)), sc)
			for rr := range r {
				copy(out[((t0+rr)*s.heads+kvh*group)*s.hd:][:group*s.hd], sc.acc[rr*group*s.hd:][:group*s.hd])
			}
			attnScratchPool.Put(sc)
		}
	}
	return out
}

// attnTileCases are the shapes the tile tests run: Qwen3-Next's (16 query
// heads on 2 KV heads of 256), one query head per KV head, groups of 3 and
// 4, and head widths off the kernels' steps (12, 20) and off AVX2's (6).
var attnTileCases = []attnShape{{16, 2, 256, true}, {4, 4, 8, false}, {6, 2, 12, true}, {3, 1, 20, false}, {8, 2, 16, false}, {4, 2, 6, true}}

// TestAttentionTiles: the attention dispatch (its tiles of window rows and
// query heads, on 1–3 threads) against attentionRef on random data, at
// windows of 1 to 26 rows at positions 0 to 40: within 1e-6 of Σ p·|v|
// (float32's rounding of the result is 6e-8). The cache rows past the
// window are NaN, so a read past the causal mask shows. Then 23 rows (13
// under -race) in one window, in windows of 5 rows and one row at a time
// (decode) agree to the bit, and so do attnTile's float64 results for
// tiles of all, 5, 3 and 1 rows: a row's result does not depend on its
// tile.
func TestAttentionTiles(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	const ctx = 72
	hosts := []*Host{nil, New(1), New(2), New(3)}
	for _, s := range attnTileCases {
		kvDim, qStride := s.kvHeads*s.hd, s.hd
		if s.gated {
			qStride = 2 * s.hd
		}
		fill := func(n int) []float32 {
			v := make([]float32, n)
			for i := range v {
				v[i] = float32(rng.NormFloat64())
			}
			return v
		}
		kc, vc := fill(ctx*kvDim), fill(ctx*kvDim)
		for i := range kc {
			kc[i] *= 2 // sharper softmaxes
		}
		window := func(pos, rows int) (q, qfull, k, v []float32) {
			q, qfull = fill(rows*s.heads*s.hd), fill(rows*s.heads*qStride)
			k, v = slices.Clone(kc), slices.Clone(vc)
			for i := (pos + rows) * kvDim; i < len(k); i++ {
				k[i], v[i] = float32(math.NaN()), float32(math.NaN())
			}
			return
		}
		windows := [][3]int{{0, 1, 1}, {0, 7, 2}, {5, 13, 2}, {40, 4, 3}, {9, 26, 1}}
		n := 23
		if raceEnabled {
			windows, n = windows[1:4], 13
		}
		for _, w := range windows {
			pos, rows, threads := w[0], w[1], w[2]
			q, qfull, k, v := window(pos, rows)
			got := runAttention(t, hosts[threads], s, ctx, pos, rows, q, qfull, k, v)
			want, mag := attentionRef(s, pos, rows, q, qfull, k, v)
			for i := range want {
				if e := math.Abs(float64(got[i]) - want[i]); !(e <= 1e-6*mag[i]+1e-30) {
					t.Fatalf("%+v, window of %d rows at %d: row %d head %d [%d] = %.9g, want %.9g", s, rows, pos, i/(s.heads*s.hd), i/s.hd%s.heads, i%s.hd, got[i], want[i])
				}
			}
		}
		q, qfull, _, _ := window(0, n)
		// In float64, before the rounding to float32 hides the last bits.
		whole64 := tileOutputs(s, 3, n, n, q, kc, vc)
		for _, tile := range []int{5, 3, 1} {
			for i, v := range tileOutputs(s, 3, n, tile, q, kc, vc) {
				if math.Float64bits(v) != math.Float64bits(whole64[i]) {
					t.Fatalf("%+v, tiles of %d rows: row %d [%d] = %v, one tile %v", s, tile, i/(s.heads*s.hd), i%(s.heads*s.hd), v, whole64[i])
				}
			}
		}
		var whole []float32
		for _, rows := range []int{n, 5, 1} {
			var ys []float32
			for pos := 0; pos < n; pos += rows {
				r := min(rows, n-pos)
				_, _, k, v := window(pos, r)
				ys = append(ys, runAttention(t, hosts[2], s, ctx, pos, r, q[pos*s.heads*s.hd:][:r*s.heads*s.hd], qfull[pos*s.heads*qStride:][:r*s.heads*qStride], k, v)...)
			}
			if whole == nil {
				whole = ys
				continue
			}
			for i := range ys {
				if math.Float32bits(ys[i]) != math.Float32bits(whole[i]) {
					t.Fatalf("%+v, windows of %d rows: row %d [%d] = %v, one window %v", s, rows, i/(s.heads*s.hd), i%(s.heads*s.hd), ys[i], whole[i])
				}
			}
		}
	}
}

// The AVX2 silu·up agrees with the Go kernel (math.Exp) to the float32 bit
// but for rounding ties, over the range the MLPs see and past both ends of
// exp's (±708, where e^−x over- or underflows), zeros and signed zeros.
func TestSiluMulVector(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	const n = 1 << 16
	g, u := make([]float32, n+3), make([]float32, n+3)
	for i := range g {
		switch {
		case i%7 == 0:
			g[i] = float32(rng.NormFloat64() * 300) // far out: e^−x past float32's range
		case i%11 == 0:
			g[i] = []float32{0, float32(math.Copysign(0, -1)), 800, -800, 709, -709, 88, -88, -103}[i/11%9]
		default:
			g[i] = float32(rng.NormFloat64() * 4)
		}
		u[i] = float32(rng.NormFloat64())
	}
	want, got := make([]float32, 2*(n+3)), make([]float32, 2*(n+3))
	siluMulGo(want[:n+3], g, u)
	siluMul(got[:n+3], g, u)
	copy(want[n+3:], g) // and silu alone, in place
	copy(got[n+3:], g)
	siluRowGo(want[n+3:])
	siluRow(got[n+3:])
	g, u = append(g, g...), append(u, make([]float32, n+3)...)
	diff := 0
	for i := range want {
		if got[i] == want[i] {
			continue
		}
		ulps := int64(math.Float32bits(got[i])) - int64(math.Float32bits(want[i]))
		if ulps < -1 || ulps > 1 || math.Signbit(float64(got[i])) != math.Signbit(float64(want[i])) {
			t.Fatalf("g=%v u=%v: got %v, want %v", g[i], u[i], got[i], want[i])
		}
		diff++
	}
	if diff > 2*n/1000 {
		t.Errorf("%d of %d results differ by one ulp; ties should be rare", diff, n)
	}
	t.Logf("%d of %d differ by one ulp", diff, len(want))
	// A broken kernel is caught: one coefficient short of the series.
	bad := append([]float32(nil), got...)
	bad[5] = math.Nextafter32(bad[5], 10)
	bad[5] = math.Nextafter32(bad[5], 10)
	if ulps := int64(math.Float32bits(bad[5])) - int64(math.Float32bits(want[5])); ulps >= -1 && ulps <= 1 {
		t.Errorf("a two-ulp error passes the check")
	}
}

// The AVX2 softmax exp agrees with math.Exp to within a few units of the
// double's last place (the series' truncation is 2e-16 at most), over the shifted scores attention sees (≤ 0) and
// past exp's range (where it clamps at e^−708 ≈ 3e-308, which no sum of
// probabilities notices).
func TestExpShiftVector(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	const n = 1<<14 + 3
	x := make([]float64, n)
	for i := range x {
		x[i] = -math.Abs(rng.NormFloat64() * 20)
		if i%97 == 0 {
			x[i] = -700 * rng.Float64()
		}
	}
	x[0] = 0
	want, got := append([]float64(nil), x...), append([]float64(nil), x...)
	expShiftGo(want, 1.5)
	expShift(got, 1.5)
	worst := 0.0
	for i := range want {
		if want[i] < 1e-300 {
			if got[i] > 1e-300 {
				t.Fatalf("x=%v: got %v, want %v", x[i]-1.5, got[i], want[i])
			}
			continue
		}
		worst = max(worst, math.Abs(got[i]-want[i])/want[i])
	}
	if worst > 1e-14 {
		t.Errorf("worst relative error %.3g, want ≤ 1e-14", worst)
	}
	t.Logf("worst relative error %.3g", worst)
}
