package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
	"unsafe"

	"golang.org/x/sys/cpu"
)

var act8Formats = []string{"q8_0", "q6_k", "q4_k", "iq2_xs", "iq4_nl", "iq4_xs", "q2_k", "q3_k", "q5_k", "q4_0", "q4_1", "q5_0", "q5_1",
	"iq2_xxs", "iq3_xxs", "iq2_s", "iq3_s", "iq1_s", "iq1_m"}

// TestAct8Quantize: a hand-derived block. max|x| = 2 gives D = 2/127 and
// levels round(x·127/2), halves away from zero as ggml's roundf; the
// second block is zero, the row is padded with zero blocks to 256.
func TestAct8Quantize(t *testing.T) {
	x := make([]float32, 40)
	copy(x, []float32{2, -1, 0.5, -2, 1.0 / 127})
	var a Act8
	a.Quantize(x)
	if len(a.Q) != 256 || len(a.D) != 8 || a.Len() != 40 {
		t.Fatalf("padded to %d values, %d scales (Len %d); want 256, 8 (40)", len(a.Q), len(a.D), a.Len())
	}
	want := []int8{127, -64, 32, -127, 1} // 63.5 → 64, 31.75 → 32, 0.5 → 1
	for i, w := range want {
		if a.Q[i] != w {
			t.Errorf("Q[%d] = %d, want %d", i, a.Q[i], w)
		}
	}
	if a.D[0] != float32(2)/127 || a.S[0] != a.D[0]*float32(127-64+32-127+1) {
		t.Errorf("D[0] %g S[0] %g", a.D[0], a.S[0])
	}
	// the sums per 16 values: the five levels are all in the first 16
	if len(a.H) != 16 || a.H[0] != a.S[0] || a.H[1] != 0 {
		t.Errorf("%d sums per 16, H[0] %g H[1] %g; want 16, %g, 0", len(a.H), a.H[0], a.H[1], a.S[0])
	}
	x[20] = 1 // level 64 in the second 16
	a.Quantize(x)
	if a.H[1] != a.D[0]*64 || a.H[0]+a.H[1] != a.S[0] {
		t.Errorf("H[0] %g H[1] %g S[0] %g; want H[1] = %g", a.H[0], a.H[1], a.S[0], a.D[0]*64)
	}
	if a.G[0] != 127-64+32-127+1 || a.G[1] != 64 {
		t.Errorf("integer sums per 16 G[0] %d G[1] %d; want %d, 64", a.G[0], a.G[1], 127-64+32-127+1)
	}
	for b := 1; b < 8; b++ {
		if a.D[b] != 0 || a.S[b] != 0 || a.H[2*b] != 0 || a.H[2*b+1] != 0 || a.G[2*b] != 0 || a.G[2*b+1] != 0 {
			t.Errorf("block %d (zero/padding): D %g S %g", b, a.D[b], a.S[b])
		}
	}
	for i := 40; i < 256; i++ {
		if a.Q[i] != 0 {
			t.Fatalf("padding Q[%d] = %d", i, a.Q[i])
		}
	}
	x[3] = float32(math.NaN())
	a.Quantize(x)
	if !math.IsNaN(float64(a.D[0])) {
		t.Errorf("a NaN activation: scale %g, want NaN", a.D[0])
	}
}

// TestAct8Quantize256: hand-derived rows with one scale per 256. A row of
// 300 values: the first 256's max|x| = 2 lies at value 200 (its seventh
// block), so every block of that 256 takes D = 2/127 (value 40's 1 is
// level round(63.5) = 64, value 100's −0.5 level −32); the second 256
// (values 256-299, then padding) takes D = 4/127 from value 260, its
// padding blocks levels 0 at that scale. A NaN makes its 256's eight
// scales NaN and leaves the other 256 as it was.
func TestAct8Quantize256(t *testing.T) {
	x := make([]float32, 300)
	x[200], x[40], x[100], x[260], x[299] = 2, 1, -0.5, 4, 1
	for i := 0; i < 32; i++ {
		x[i] = float32(i%5) / 8 // small values: levels round(x·63.5) at the 256's scale
	}
	var a Act8
	a.Quantize256(x)
	if !a.Wide() || len(a.Q) != 512 || len(a.D) != 16 {
		t.Fatalf("Wide %v, %d values, %d scales; want true, 512, 16", a.Wide(), len(a.Q), len(a.D))
	}
	d0, d1 := float32(2)/127, float32(4)/127
	for b := range 16 {
		if want := map[bool]float32{true: d0, false: d1}[b < 8]; a.D[b] != want {
			t.Errorf("D[%d] = %g, want %g", b, a.D[b], want)
		}
	}
	for i, want := range map[int]int8{200: 127, 40: 64, 100: -32, 260: 127, 299: 32, 4: 32, 3: 24, 1: 8} {
		if a.Q[i] != want {
			t.Errorf("Q[%d] = %d, want %d", i, a.Q[i], want)
		}
	}
	if a.S[1] != d0*64 || a.H[2] != d0*64 || a.H[3] != 0 || a.G[2] != 64 || a.S[3] != d0*-32 || a.S[6] != d0*127 {
		t.Errorf("sums: S[1] %g H[2] %g H[3] %g G[2] %d S[3] %g S[6] %g", a.S[1], a.H[2], a.H[3], a.G[2], a.S[3], a.S[6])
	}
	if a.G[0] != 3*(8+16+24+32) { // values 0-15: levels 0, 8, 16, 24, 32 three times, then 0
		t.Errorf("G[0] = %d, want %d", a.G[0], 3*(8+16+24+32))
	}
	for i := 300; i < 512; i++ {
		if a.Q[i] != 0 {
			t.Fatalf("padding Q[%d] = %d", i, a.Q[i])
		}
	}
	a.Quantize(x)
	if a.Wide() || a.D[0] != float32(0.5)/127 {
		t.Errorf("Quantize after Quantize256: Wide %v, D[0] %g; want false, %g", a.Wide(), a.D[0], float32(0.5)/127)
	}
	x[17] = float32(math.NaN())
	a.Quantize256(x)
	for b := range 8 {
		if !math.IsNaN(float64(a.D[b])) {
			t.Errorf("a NaN in the first 256: D[%d] = %g, want NaN", b, a.D[b])
		}
	}
	if a.D[8] != d1 || a.Q[260] != 127 {
		t.Errorf("a NaN in the first 256: D[8] %g Q[260] %d, want %g, 127", a.D[8], a.Q[260], d1)
	}
}

// checkAct8 holds an integer dot to two independent references: the
// reference decoder's values dotted with the dequantized activations in
// float64 (float32 reassociation only: dot32Tol), and with the original
// activations, within the documented quantization bound Σ_b D_b/2·Σ|w|.
func checkAct8(t *testing.T, f *Format, blk []byte, x []float32, a *Act8, got float32, what string) {
	t.Helper()
	xh := a.Dequantize()
	ref, mag := decodedDot(f, blk, xh)
	if math.IsNaN(ref) || math.IsInf(ref, 0) || mag > math.MaxFloat32/2 {
		return
	}
	if !(math.Abs(float64(got)-ref) <= dot32Tol*mag+1e-30) { // a NaN fails
		t.Errorf("%s %s (%d values): act8 dot %.9g, Decode·x̂ %.9g (Σ|·| %.3g)", f.Name, what, len(x), got, ref, mag)
	}
	w := make([]float32, len(x))
	f.Decode(blk, w)
	var exact, bound float64
	for i := range w {
		exact += float64(w[i]) * float64(x[i])
		bound += math.Abs(float64(w[i])) * float64(a.D[i/Act8Block]) / 2
	}
	if !(math.Abs(float64(got)-exact) <= bound*(1+1e-5)+dot32Tol*mag+1e-30) {
		t.Errorf("%s %s: act8 dot %.9g, Decode·x %.9g: off by more than the quantization bound %.3g", f.Name, what, got, exact, bound)
	}
}

// TestAct8Kernels: every integer kernel against the references above, on
// random blocks (every bit pattern of levels and scale codes) and real
// encodings, at one to nine blocks and activations with outliers.
func TestAct8Kernels(t *testing.T) {
	if runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C {
		for _, name := range act8Formats {
			if _, ok := (RowLayout{Format: mustFormat(t, name)}).Act8Kernel(); !ok {
				t.Errorf("%s: no integer kernel on this AVX2 machine", name)
			}
		}
	}
	r := rand.New(rand.NewPCG(31, 32))
	for _, name := range act8Formats {
		f := mustFormat(t, name)
		for nb := 1; nb <= 9; nb++ {
			n := nb * f.BlockElems
			rl := RowLayout{Format: f, Len: n, Stored: n}
			k, ok := rl.Act8Kernel()
			if !ok {
				t.Skipf("%s: no integer kernel here", name)
			}
			for trial := range 4 {
				x := gaussian(n, r.Uint64())
				if trial >= 2 {
					x[r.IntN(n)] *= 40 // an outlier block
				}
				blk := randomBlocks(f, nb, r)
				if trial%2 == 1 && f.Encode != nil {
					f.Encode(gaussian(n, r.Uint64()), blk)
				}
				var a Act8
				a.Quantize(x)
				checkAct8(t, f, blk, x, &a, k.Dot(blk, &a), "random")
			}
		}
	}
}

// firstEight is ar's rows 0-7, as the eight-row kernels take them.
func firstEight(ar *Act8Rows) (eight [8]*Act8) {
	for i := range eight {
		eight[i] = ar.Row(i)
	}
	return eight
}

// TestAct8Rows: four rows at once (Act8Rows, the four-row kernel where the
// format has one) and padded rows (rows not whole blocks), each against
// the references.
func TestAct8Rows(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for _, name := range act8Formats {
		f := mustFormat(t, name)
		for _, n := range []int{f.BlockElems, 3 * f.BlockElems, f.BlockElems + 1, 3*f.BlockElems - 7, 640} {
			rl, err := ForRow(name, n, Pad)
			if err != nil {
				t.Fatal(err)
			}
			k, ok := rl.Act8Kernel()
			if !ok {
				t.Skipf("%s: no integer kernel here", name)
			}
			row := make([]byte, rl.RowBytes())
			if f.Encode != nil {
				rl.EncodeRow(gaussian(n, r.Uint64()), row)
			} else { // decode-only: random blocks (ggml's own are TestAct8GGMLBlocks')
				row = randomBlocks(f, rl.Stored/f.BlockElems, r)
			}
			xs := gaussian(5*n, r.Uint64())
			var ar Act8Rows
			ar.Quantize(xs, 5, n)
			var four [4]*Act8
			for i := range four {
				four[i] = ar.Row(i + 1)
			}
			var out [4]float32
			k.Dot4(row, &four, &out)
			// DotRows4: the same kernel over consecutive weight rows
			two := make([][4]float32, 2)
			k.DotRows4(append(slices.Clone(row), row...), len(row), &four, two)
			if two[0] != out || two[1] != out {
				t.Errorf("%s row of %d: DotRows4 %v, Dot4 %v", name, n, two, out)
			}
			if k.HasDot2() {
				// two rows (rows 1 and 2 of xs) through the two-row kernel,
				// over consecutive weight rows too
				two := [2]*Act8{ar.Row(1), ar.Row(2)}
				o2 := make([][2]float32, 2)
				k.DotRows2(append(slices.Clone(row), row...), len(row), &two, o2)
				if o2[0] != o2[1] {
					t.Errorf("%s row of %d: DotRows2 %v", name, n, o2)
				}
				for i := range two {
					x := make([]float32, rl.Stored)
					copy(x, xs[(i+1)*n:(i+2)*n])
					var a Act8
					a.Quantize(x)
					checkAct8(t, f, row, x, &a, o2[0][i], "two rows")
				}
			}
			if k.HasDot8() {
				// eight rows (rows 1-4 again after rows 0-3 of xs, in one
				// buffer): the eight-row kernel, over consecutive weight rows
				// too, each row against the references; then eight rows not
				// at one stride (four-row and one-row dots)
				xrow := func(i int) []float32 { return xs[i%5*n : (i%5+1)*n] }
				var rows8 Act8Rows
				rows8.Quantize(slices.Concat(xs[:4*n], xs[n:5*n]), 8, n)
				eight := firstEight(&rows8)
				var o8 [8]float32
				k.Dot8(row, &eight, &o8)
				two8 := make([][8]float32, 2)
				k.DotRows8(append(slices.Clone(row), row...), len(row), &eight, two8)
				if two8[0] != o8 || two8[1] != o8 {
					t.Errorf("%s row of %d: DotRows8 %v, Dot8 %v", name, n, two8, o8)
				}
				// the same rows with one scale per 256 (Quantize256)
				var wide8 Act8Rows
				wide8.Quantize256(slices.Concat(xs[:4*n], xs[n:5*n]), 8, n)
				wideRows := firstEight(&wide8)
				var ow [8]float32
				k.Dot8(row, &wideRows, &ow)
				for i := range 8 {
					x := make([]float32, rl.Stored)
					copy(x, xrow(i%4+i/4))
					var a Act8
					a.Quantize256(x)
					checkAct8(t, f, row, x, &a, ow[i], "eight rows, a scale per 256")
				}
				// four and two of them
				var o4 [4]float32
				k.Dot4(row, (*[4]*Act8)(wideRows[4:]), &o4)
				o2 := make([][2]float32, 1)
				k.DotRows2(row, 0, (*[2]*Act8)(wideRows[1:3]), o2)
				for i, got := range append(o4[:], o2[0][:]...) {
					rx := []int{1, 2, 3, 4, 1, 2}[i] // wideRows 4-7 are xs rows 1-4, 1-2 rows 1-2
					x := make([]float32, rl.Stored)
					copy(x, xrow(rx))
					var a Act8
					a.Quantize256(x)
					checkAct8(t, f, row, x, &a, got, []string{"four rows, a scale per 256", "two rows, a scale per 256"}[i/4])
				}
				for i := range eight {
					eight[i] = ar.Row(i % 5)
				}
				var mixed [8]float32
				k.Dot8(row, &eight, &mixed)
				for i := range 8 {
					rx := i%4 + i/4 // rows 0-3 of xs, then 1-4
					x := make([]float32, rl.Stored)
					copy(x, xrow(rx))
					var a Act8
					a.Quantize(x)
					checkAct8(t, f, row, x, &a, o8[i], "eight rows")
					x = make([]float32, rl.Stored)
					copy(x, xrow(i))
					a.Quantize(x)
					checkAct8(t, f, row, x, &a, mixed[i], "eight rows not at one stride")
				}
			}
			w := make([]float32, rl.Stored)
			clear(w)
			for i := range out {
				x := make([]float32, rl.Stored)
				copy(x, xs[(i+1)*n:(i+2)*n])
				var a Act8
				a.Quantize(x)
				checkAct8(t, f, row, x, &a, out[i], "four rows")
				if one := k.Dot(row, four[i]); one != k.Dot(row, &a) {
					t.Errorf("%s row of %d: the row's Act8Rows view and its own Act8 disagree", name, n)
				}
			}
		}
	}
}

// FuzzAct8Dot feeds arbitrary bytes as blocks to the integer kernels.
func FuzzAct8Dot(f *testing.F) {
	f.Add(uint8(0), make([]byte, 300), int64(1))
	f.Add(uint8(1), []byte{7, 8, 9}, int64(2))
	f.Fuzz(func(t *testing.T, which uint8, data []byte, seed int64) {
		fm := mustFormat(t, act8Formats[int(which)%len(act8Formats)])
		nb := len(data) / fm.BlockBytes
		if nb == 0 || nb > 64 {
			return
		}
		n := nb * fm.BlockElems
		k, ok := RowLayout{Format: fm, Len: n, Stored: n}.Act8Kernel()
		if !ok {
			return
		}
		x := gaussian(n, uint64(seed))
		var a Act8
		a.Quantize(x)
		checkAct8(t, fm, data[:nb*fm.BlockBytes], x, &a, k.Dot(data[:nb*fm.BlockBytes], &a), "fuzzed")
	})
}

// TestAct8GGMLBlocks: every integer kernel on the blocks ggml wrote
// (testdata/ggml_<format>.bin: its quantizer's blocks and random blocks),
// against ggml's own decode of them dotted with x̂ in float64, and with x
// within the quantization bound: a reference that shares no code with ours.
// The activations of the first trial follow the weights, so that the
// float32 tolerance (relative to Σ|w·x̂|) is relative to the dot itself;
// then four rows at once (Dot4, the four-row kernel where there is one).
// The quantized blocks also go without their last three (21 of 24 for the
// 32-value formats: two groups of eight and a tail).
func TestAct8GGMLBlocks(t *testing.T) {
	for _, name := range act8Formats {
		c := readGGMLCase(t, name)
		if _, ok := (RowLayout{Format: c.f, Len: len(c.y), Stored: len(c.y)}).Act8Kernel(); !ok {
			t.Skipf("%s: no integer kernel here", name)
		}
		nb := len(c.y) / c.f.BlockElems
		for _, set := range []struct {
			what   string
			blocks []byte
			y      []float32
		}{{"ggml-quantized", c.blocks, c.y}, {"ggml-decoded random", c.rnd, c.rndY},
			// the leading blocks, so that an eight-block loop leaves a tail
			{"ggml-quantized prefix", c.blocks[:max(1, nb-3)*c.f.BlockBytes], c.y[:max(1, nb-3)*c.f.BlockElems]}} {
			n := len(set.y)
			k, _ := RowLayout{Format: c.f, Len: n, Stored: n}.Act8Kernel()
			for trial := range 2 {
				x := ggmlTrialActs(set.y, trial, 0)
				var a Act8
				a.Quantize(x)
				checkGGMLDot(t, name+" "+set.what+", one row", set.y, x, &a, k.Dot(set.blocks, &a))
			}
			checkGGMLRun(t, name+" "+set.what, k, set.blocks, set.y)
			// four rows (the four-row kernel where the format has one), in
			// one Act8Rows buffer as the cpu backend lays them out
			xs := make([]float32, 0, 4*n)
			for r := range 4 {
				xs = append(xs, ggmlTrialActs(set.y, r%2, r)...)
			}
			var ar Act8Rows
			ar.Quantize(xs, 4, n)
			four := [4]*Act8{ar.Row(0), ar.Row(1), ar.Row(2), ar.Row(3)}
			var out [4]float32
			k.Dot4(set.blocks, &four, &out)
			for r := range 4 {
				checkGGMLDot(t, fmt.Sprintf("%s %s, four rows (row %d)", name, set.what, r), set.y, xs[r*n:(r+1)*n], four[r], out[r])
			}
			if k.HasDot2() {
				two := [2]*Act8{ar.Row(2), ar.Row(3)}
				out2 := make([][2]float32, 1)
				k.DotRows2(set.blocks, 0, &two, out2)
				for r := range 2 {
					checkGGMLDot(t, fmt.Sprintf("%s %s, two rows (row %d)", name, set.what, r), set.y, xs[(r+2)*n:(r+3)*n], two[r], out2[0][r])
				}
			}
			if !k.HasDot8() {
				continue
			}
			// eight rows (the eight-row kernel), in one buffer
			for r := 4; r < 8; r++ {
				xs = append(xs, ggmlTrialActs(set.y, r%2, r)...)
			}
			ar.Quantize(xs, 8, n)
			var eight [8]*Act8
			for r := range eight {
				eight[r] = ar.Row(r)
			}
			var out8 [8]float32
			k.Dot8(set.blocks, &eight, &out8)
			for r := range 8 {
				checkGGMLDot(t, fmt.Sprintf("%s %s, eight rows (row %d)", name, set.what, r), set.y, xs[r*n:(r+1)*n], eight[r], out8[r])
			}
			// the same rows with one scale per 256 (Quantize256): the
			// eight-row kernel for such rows where the format has one, and
			// the one-row kernel on them
			ar.Quantize256(xs, 8, n)
			k.Dot8(set.blocks, &eight, &out8)
			for r := range 8 {
				checkGGMLDot(t, fmt.Sprintf("%s %s, eight rows, a scale per 256 (row %d)", name, set.what, r), set.y, xs[r*n:(r+1)*n], eight[r], out8[r])
			}
			checkGGMLDot(t, fmt.Sprintf("%s %s, one row, a scale per 256", name, set.what), set.y, xs[3*n:4*n], eight[3], k.Dot(set.blocks, eight[3]))
			four = [4]*Act8{ar.Row(4), ar.Row(5), ar.Row(6), ar.Row(7)}
			k.Dot4(set.blocks, &four, &out)
			for r := range 4 {
				checkGGMLDot(t, fmt.Sprintf("%s %s, four rows, a scale per 256 (row %d)", name, set.what, r), set.y, xs[(r+4)*n:(r+5)*n], four[r], out[r])
			}
			if k.HasDot2() {
				two := [2]*Act8{ar.Row(1), ar.Row(2)}
				out2 := make([][2]float32, 1)
				k.DotRows2(set.blocks, 0, &two, out2)
				for r := range 2 {
					checkGGMLDot(t, fmt.Sprintf("%s %s, two rows, a scale per 256 (row %d)", name, set.what, r), set.y, xs[(r+1)*n:(r+2)*n], two[r], out2[0][r])
				}
			}
		}
	}
}

// checkGGMLRun checks DotRows over a run of weight rows with one
// activation row (decode's matmuls): the blocks, then them in reverse
// block order, then them again, at a stride past the row with garbage
// between, each against ggml's decode of its blocks.
func checkGGMLRun(t *testing.T, what string, k Act8Dot, blocks []byte, y []float32) {
	t.Helper()
	bb, be := k.r.Format.BlockBytes, k.r.Format.BlockElems
	nb := len(blocks) / bb
	rev, revY := make([]byte, 0, len(blocks)), make([]float32, 0, len(y))
	for b := nb - 1; b >= 0; b-- {
		rev = append(rev, blocks[b*bb:(b+1)*bb]...)
		revY = append(revY, y[b*be:(b+1)*be]...)
	}
	stride := len(blocks) + 7
	data := make([]byte, 3*stride)
	for i := range data {
		data[i] = 0xa5
	}
	rowsY := [][]float32{y, revY, y}
	for r, b := range [][]byte{blocks, rev, blocks} {
		copy(data[r*stride:], b)
	}
	x := ggmlTrialActs(y, 0, 3)
	var a Act8
	a.Quantize(x)
	out := make([]float32, 3)
	k.DotRows(data, stride, &a, out)
	for r := range out {
		checkGGMLDot(t, fmt.Sprintf("%s, a run of rows (row %d)", what, r), rowsY[r], x, &a, out[r])
	}
}

// ggmlTrialActs are activations for the weights y: along them for even
// trials (Σ|w·x| ≈ |Σ w·x|, so that a scaled result shows), else noise
// with one outlier.
func ggmlTrialActs(y []float32, trial, seed int) []float32 {
	n := len(y)
	x := gaussian(n, uint64(7+trial+10*seed))
	if trial%2 == 0 {
		for i, w := range y {
			x[i] = w + x[i]*abs32(w)/8
		}
	} else {
		x[n/3] *= 50
	}
	return x
}

// checkGGMLDot holds got, an integer dot of blocks ggml decodes to y with
// the activations x quantized to a, to ggml's decode·x̂ in float64 and to
// ggml's decode·x within the quantization bound.
func checkGGMLDot(t *testing.T, what string, y, x []float32, a *Act8, got32 float32) {
	t.Helper()
	got := float64(got32)
	xh := a.Dequantize()
	var ref, mag, exact, bound float64
	for i, w := range y {
		ref += float64(w) * float64(xh[i])
		mag += math.Abs(float64(w) * float64(xh[i]))
		exact += float64(w) * float64(x[i])
		bound += math.Abs(float64(w)) * float64(a.D[i/Act8Block]) / 2
	}
	if !(math.Abs(got-ref) <= dot32Tol*mag+1e-30) { // a NaN fails
		t.Errorf("%s (%d values): act8 dot %.9g, ggml decode·x̂ %.9g (Σ|·| %.3g)", what, len(y), got, ref, mag)
	}
	if !(math.Abs(got-exact) <= bound*(1+1e-5)+dot32Tol*mag) {
		t.Errorf("%s: act8 dot %.9g, ggml decode·x %.9g: off by more than the bound %.3g", what, got, exact, bound)
	}
}

// TestAct8RowsSel: QuantizeSel and Gather give each row exactly the levels,
// scales and sums of the row quantized on its own, at one stride (the
// four-row kernel takes them: Dot4 equals four Dots within float32
// reassociation).
func TestAct8RowsSel(t *testing.T) {
	const k, rows = 300, 6
	x := gaussian(rows*k, 9)
	sel := []int{4, 1, 1, 5, 0}
	var all, bySel, gathered Act8Rows
	all.Quantize(x, rows, k)
	bySel.QuantizeSel(x, k, sel)
	gathered.Gather(&all, sel)
	if bySel.Rows() != len(sel) || gathered.Rows() != len(sel) {
		t.Fatalf("%d and %d rows, want %d", bySel.Rows(), gathered.Rows(), len(sel))
	}
	for i, r := range sel {
		var own Act8
		own.Quantize(x[r*k : (r+1)*k])
		for _, got := range []*Act8{bySel.Row(i), gathered.Row(i)} {
			if got.Len() != k || !slices.Equal(got.Q, own.Q) || !slices.Equal(got.D, own.D) ||
				!slices.Equal(got.S, own.S) || !slices.Equal(got.H, own.H) || !slices.Equal(got.G, own.G) {
				t.Fatalf("row %d (x row %d) differs from the row quantized on its own", i, r)
			}
		}
	}
	rl, err := ForRow("q4_k", k, Pad)
	if err != nil {
		t.Fatal(err)
	}
	kd, ok := rl.Act8Kernel()
	if !ok {
		t.Skip("no integer kernel here")
	}
	row := make([]byte, rl.RowBytes())
	rl.EncodeRow(gaussian(k, 10), row)
	four := [4]*Act8{gathered.Row(1), gathered.Row(2), gathered.Row(3), gathered.Row(4)}
	at := func(a *Act8) uintptr { return uintptr(unsafe.Pointer(&a.Q[0])) }
	for r := 1; r < 4; r++ {
		if at(four[r])-at(four[r-1]) != at(four[1])-at(four[0]) {
			t.Errorf("gathered rows not at one stride")
		}
	}
	var out [4]float32
	kd.Dot4(row, &four, &out)
	for r, a := range four {
		if one := kd.Dot(row, a); math.Abs(float64(one-out[r])) > 1e-5*math.Abs(float64(one))+1e-6 {
			t.Errorf("row %d: Dot4 %g, Dot %g", r, out[r], one)
		}
	}
}

// TestAct8QuantizeAssembly: the assembly quantizer of whole blocks gives
// quantizeAct8Block's levels, scales and sums bit for bit (same float32
// operations), on gaussian blocks, blocks of exact halves (x·id = k + 0.5:
// rounding away from zero), signed zeros, subnormals, one nonzero value and
// outliers, and leaves zero, non-finite and tiny blocks to the Go code.
func TestAct8QuantizeAssembly(t *testing.T) {
	if quantize32 == nil {
		t.Skip("no assembly quantizer here")
	}
	r := rand.New(rand.NewPCG(51, 52))
	var blocks [][]float32
	for range 200 {
		blocks = append(blocks, gaussian(Act8Block, r.Uint64()))
	}
	halves := make([]float32, Act8Block) // max 127 → id = 1: x·id = x
	for i := range halves {
		halves[i] = float32(i-16) + 0.5
	}
	halves[0] = 127
	blocks = append(blocks, halves)
	signed := make([]float32, Act8Block)
	signed[3], signed[5], signed[9] = float32(math.Copysign(0, -1)), 1e-3, -2
	tiny := make([]float32, Act8Block)
	for i := range tiny {
		tiny[i] = math.Float32frombits(uint32(i + 1)) // subnormals
	}
	one := make([]float32, Act8Block)
	one[31] = -3.5
	out := gaussian(Act8Block, 99)
	out[7] = 1e30
	blocks = append(blocks, signed, tiny, one, out)
	for bi, xs := range blocks {
		var q1, q2 [Act8Block]int8
		var d1, s1, d2, s2 float32
		var h1, h2 [2]float32
		var g1, g2 [2]int16
		quantizeAct8Block(xs, q1[:], &d1, &s1, &h1, &g1)
		if !quantize32(&xs[0], &q2[0], &d2, &s2, &h2[0], &g2[0]) {
			if &xs[0] != &tiny[0] {
				t.Fatalf("block %d: the assembly left a finite block not tiny", bi)
			}
			continue
		}
		bits := func(f ...float32) (b []uint32) {
			for _, v := range f {
				b = append(b, math.Float32bits(v))
			}
			return b
		}
		if q1 != q2 || !slices.Equal(bits(d1, s1, h1[0], h1[1]), bits(d2, s2, h2[0], h2[1])) || g1 != g2 {
			t.Fatalf("block %d: assembly levels %v d %g s %g h %v g %v; Go %v d %g s %g h %v g %v", bi, q2, d2, s2, h2, g2, q1, d1, s1, h1, g1)
		}
	}
	// the quantizer with its 256's max given: the Go code's bits, with the
	// block's own max and with a larger one
	for bi, xs := range blocks {
		own := absMaxBits(xs)
		for _, amax := range []uint32{own, math.Float32bits(3 * math.Float32frombits(own))} {
			var q1, q2 [Act8Block]int8
			var d1, s1, d2, s2 float32
			var h1, h2 [2]float32
			var g1, g2 [2]int16
			quantizeAct8BlockMax(xs, q1[:], &d1, &s1, &h1, &g1, amax)
			if !quantize32Max(&xs[0], &q2[0], &d2, &s2, &h2[0], &g2[0], amax) {
				if &xs[0] != &tiny[0] {
					t.Fatalf("block %d, max bits %#x: the assembly left a finite block not tiny", bi, amax)
				}
				continue
			}
			if q1 != q2 || d1 != d2 || s1 != s2 || h1 != h2 || g1 != g2 {
				t.Fatalf("block %d, max bits %#x: assembly levels %v d %g s %g h %v g %v; Go %v d %g s %g h %v g %v", bi, amax, q2, d2, s2, h2, g2, q1, d1, s1, h1, g1)
			}
		}
	}
	// the max of 256 values: each position in turn holding the largest,
	// signed zeros, −Inf and NaN
	for i := range 256 {
		x := gaussian(256, uint64(i))
		x[i] = float32(i-128) * 100
		switch i % 64 {
		case 5:
			x[(i+9)%256] = float32(math.Inf(-1))
		case 6:
			x[(i+1)%256] = float32(math.NaN())
		case 7:
			clear(x)
			x[i] = float32(math.Copysign(0, -1))
		}
		if got, want := absMax256(&x[0]), absMaxBits(x); got != want {
			t.Fatalf("max of 256 (case %d): assembly %#x, Go %#x", i, got, want)
		}
	}
	for _, v := range []float32{0, float32(math.Inf(-1)), float32(math.NaN())} {
		xs := make([]float32, Act8Block)
		xs[4] = v
		var q [Act8Block]int8
		var d, s float32
		var h [2]float32
		var g [2]int16
		if quantize32(&xs[0], &q[0], &d, &s, &h[0], &g[0]) {
			t.Errorf("a block holding %g: the assembly took it, the Go code's special case", v)
		}
	}
}
