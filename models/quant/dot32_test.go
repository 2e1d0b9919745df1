package quant

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/sys/cpu"
)

// dot32Tol bounds |Dot32 − Σ Decode·x| by dot32Tol·Σ|Decode·x|: float32
// accumulation over 8-lane accumulators (and per-block partial sums) of rows
// up to a few thousand values, plus the decoder's own float32 rounding.
const dot32Tol = 1e-5

// decodedDot is the float64 dot of the reference decoder's values with x,
// and Σ|products|: the independent reference Dot32 is held to.
func decodedDot(f *Format, blk []byte, x []float32) (ref, mag float64) {
	y := make([]float32, len(x))
	f.Decode(blk, y)
	for i := range y {
		ref += float64(y[i]) * float64(x[i])
		mag += math.Abs(float64(y[i]) * float64(x[i]))
	}
	return ref, mag
}

func checkDot32(t *testing.T, f *Format, blk []byte, x []float32, what string) {
	t.Helper()
	ref, mag := decodedDot(f, blk, x)
	if math.IsNaN(ref) || math.IsInf(ref, 0) || mag > math.MaxFloat32/2 {
		return // outside float32's range: the result is unspecified
	}
	got := f.Dot32(blk, x)
	if math.Abs(float64(got)-ref) > dot32Tol*mag+1e-30 {
		t.Errorf("%s %s (%d values): Dot32 %.9g, Decode·x %.9g (Σ|·| %.3g)", f.Name, what, len(x), got, ref, mag)
	}
}

// TestDot32MatchesDecode holds every format's Dot32 (assembly where the
// machine has it) to the reference decoder, on random blocks (every bit
// pattern of levels and scale codes) and real encodings, at block counts
// and lengths off every boundary of the kernels' unrolling (8-, 32-value
// strides, one to nine blocks).
func TestDot32MatchesDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, name := range Names() {
		f := mustFormat(t, name)
		var sizes []int
		if f.BlockElems == 1 {
			sizes = []int{1, 7, 8, 9, 31, 32, 33, 63, 64, 65, 127, 255, 257, 1000, 2048, 2051}
		} else {
			for n := 1; n <= 9; n++ {
				sizes = append(sizes, n*f.BlockElems)
			}
		}
		for _, n := range sizes {
			for trial := 0; trial < 4; trial++ {
				x := gaussian(n, r.Uint64())
				blk := randomBlocks(f, n/f.BlockElems, r)
				if trial%2 == 1 && f.Encode != nil { // IQ formats without a quantizer: random blocks only
					f.Encode(gaussian(n, r.Uint64()), blk)
				}
				checkDot32(t, f, blk, x, "random")
			}
		}
	}
}

// TestDot32Vectorized checks that the formats with assembly run it on a
// machine that has the instructions, so the comparison above is not
// between the reference and itself.
func TestDot32Vectorized(t *testing.T) {
	if runtime.GOARCH != "amd64" || !cpu.X86.HasAVX2 || !cpu.X86.HasFMA || !cpu.X86.HasF16C {
		t.Skip("no AVX2+FMA+F16C: every format runs its reference Dot")
	}
	for _, name := range []string{"f32", "f16", "bf16", "q8_0", "q4_k", "q6_k", "iq2_xs"} {
		if !mustFormat(t, name).Vectorized {
			t.Errorf("%s: no vectorized Dot32 on this AVX2 machine", name)
		}
	}
}

// TestRowDot32Padded: rows that are not whole blocks (padded layouts)
// through RowLayout.Dot32 against the decoded row.
func TestRowDot32Padded(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, name := range []string{"q4_k", "q6_k", "iq2_xs", "q8_0"} {
		f := mustFormat(t, name)
		for _, n := range []int{f.BlockElems + 1, 3*f.BlockElems - 7, 640} {
			rl, err := ForRow(name, n, Pad)
			if err != nil {
				t.Fatal(err)
			}
			src := gaussian(n, r.Uint64())
			row := make([]byte, rl.RowBytes())
			rl.EncodeRow(src, row)
			x := gaussian(n, r.Uint64())
			y := make([]float32, n)
			rl.DecodeRow(row, y)
			var ref, mag float64
			for i := range y {
				ref += float64(y[i]) * float64(x[i])
				mag += math.Abs(float64(y[i]) * float64(x[i]))
			}
			if got := rl.Dot32(row, x); math.Abs(float64(got)-ref) > dot32Tol*mag {
				t.Errorf("%s row of %d: Dot32 %.9g, decoded %.9g", name, n, got, ref)
			}
		}
	}
}

// FuzzDot32 feeds arbitrary bytes to every format's Dot32 as blocks (and
// activations), against the reference decoder.
func FuzzDot32(f *testing.F) {
	f.Add(uint8(0), []byte{1, 2, 3}, int64(1))
	f.Add(uint8(3), make([]byte, 300), int64(2))
	names := Names()
	f.Fuzz(func(t *testing.T, which uint8, data []byte, seed int64) {
		fm := mustFormat(t, names[int(which)%len(names)])
		n := len(data) / fm.BlockBytes * fm.BlockElems
		if n == 0 || n > 1<<14 {
			return
		}
		x := gaussian(n, uint64(seed))
		checkDot32(t, fm, data[:fm.Bytes(n)], x, "fuzzed")
		if fm.Dot32x4 == nil {
			return
		}
		xs := gaussian(4*n, uint64(seed)+1)
		var out [4]float32
		fm.Dot32x4(data[:fm.Bytes(n)], xs, n, n, &out)
		for k := range out {
			ref, mag := decodedDot(fm, data[:fm.Bytes(n)], xs[k*n:(k+1)*n])
			if !math.IsNaN(ref) && !math.IsInf(ref, 0) && mag < math.MaxFloat32/2 && math.Abs(float64(out[k])-ref) > dot32Tol*mag+1e-30 {
				t.Errorf("%s fuzzed, row %d: Dot32x4 %.9g, Decode·x %.9g", fm.Name, k, out[k], ref)
			}
		}
	})
}

// TestDot32x4MatchesDecode: the four-row kernels, each row against the
// reference decoder, at one to nine blocks and row strides longer than the
// rows (as a window's activation rows sit), and through RowLayout for
// padded rows (four Dot32s).
func TestDot32x4MatchesDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	if runtime.GOARCH == "amd64" && cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C {
		for _, name := range []string{"q8_0", "q4_k", "q6_k", "iq2_xs", "f16", "bf16"} {
			if mustFormat(t, name).Dot32x4 == nil {
				t.Errorf("%s: no four-row kernel on this AVX2 machine", name)
			}
		}
	}
	for _, name := range Names() {
		f := mustFormat(t, name)
		for nb := 1; nb <= 9; nb++ {
			n := nb * f.BlockElems
			if f.BlockElems == 1 {
				n = 8*nb + 3
			}
			stride := n + 5
			blk := randomBlocks(f, n/f.BlockElems, r)
			if nb%2 == 0 && f.Encode != nil {
				f.Encode(gaussian(n, r.Uint64()), blk)
			}
			x := gaussian(3*stride+n, r.Uint64())
			rl := RowLayout{Format: f, Len: n, Stored: n}
			var out [4]float32
			rl.Dot32x4(blk, x, stride, &out)
			for k := range out {
				ref, mag := decodedDot(f, blk, x[k*stride:k*stride+n])
				if math.Abs(float64(out[k])-ref) > dot32Tol*mag+1e-30 {
					t.Errorf("%s %d values, row %d: Dot32x4 %.9g, Decode·x %.9g", name, n, k, out[k], ref)
				}
			}
		}
	}
	rl, err := ForRow("q4_k", 300, Pad)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]byte, rl.RowBytes())
	rl.EncodeRow(gaussian(300, 1), row)
	x := gaussian(4*300, 2)
	var out [4]float32
	rl.Dot32x4(row, x, 300, &out)
	for k := range out {
		if want := rl.Dot32(row, x[k*300:]); out[k] != want {
			t.Errorf("padded row %d: Dot32x4 %g, Dot32 %g", k, out[k], want)
		}
	}
}
