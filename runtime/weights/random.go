package weights

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync"

	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/models/quant"
)

// Random is a WeightSource of random weights, for benchmarks at real sizes
// (strata synth): every role is N(0, Std²) noise, deterministic per (seed,
// role, slice). Quantizing gigabytes of noise would take hours (the IQ
// quantizers run at a few million weights a second), so quantized formats
// are filled with blocks drawn from a small pool of really quantized noise
// blocks: valid blocks with the value distribution of real ones, written at
// memory speed. Random is safe for concurrent use.
type Random struct {
	Seed uint64
	Std  float64

	mu    sync.Mutex
	pools map[quant.RowLayout]*blockPool
}

// blockPool holds quantized noise: whole blocks, and the padded last block
// of a row that is not whole blocks.
type blockPool struct {
	full, tail [][]byte
}

const poolBlocks = 64

// NewRandom returns a source of N(0, 0.02²) weights for the given seed.
func NewRandom(seed uint64) *Random {
	return &Random{Seed: seed, Std: 0.02, pools: map[quant.RowLayout]*blockPool{}}
}

// rng is the generator of one (role, slice).
func (r *Random) rng(role string, index int) *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%s/%d", role, index)
	return rand.New(rand.NewPCG(r.Seed, h.Sum64()))
}

// Read fills dst with random weights for spec (index −1: all of it) in
// format, rows zero-padded to whole blocks when they are not.
func (r *Random) Read(spec models.TensorSpec, index int, format string, dst []byte) error {
	f, err := quant.Lookup(format)
	if err != nil {
		return fmt.Errorf("role %s: %w", spec.Name, err)
	}
	rl, err := rowLayout(spec, f)
	if err != nil {
		return err
	}
	rows := spec.Rows()
	if index >= 0 {
		if len(spec.Shape) < 2 || index >= spec.Shape[0] {
			return fmt.Errorf("role %s: index %d out of range of shape %v", spec.Name, index, spec.Shape)
		}
		rows /= spec.Shape[0]
	}
	if want := rows * rl.RowBytes(); len(dst) != want {
		return fmt.Errorf("role %s: destination has %d bytes, want %d for %d rows of %d stored as %s", spec.Name, len(dst), want, rows, rl.Len, describe(rl))
	}
	if index == -1 && len(spec.Shape) == 3 {
		// A stacked role is its slices, so reading it whole or slice by
		// slice gives the same bytes.
		per := len(dst) / spec.Shape[0]
		for e := 0; e < spec.Shape[0]; e++ {
			if err := r.Read(spec, e, format, dst[e*per:(e+1)*per]); err != nil {
				return err
			}
		}
		return nil
	}
	r.fill(rl, rows, r.rng(spec.Name, index), dst)
	return nil
}

// fill writes rows of noise stored as rl into dst.
func (r *Random) fill(rl quant.RowLayout, rows int, rng *rand.Rand, dst []byte) {
	f := rl.Format
	if f.BlockElems == 1 {
		v := make([]float32, min(rows*rl.Len, convChunk))
		for done := 0; done < rows*rl.Len; done += len(v) {
			v = v[:min(len(v), rows*rl.Len-done)]
			for i := range v {
				v[i] = float32(rng.NormFloat64() * r.Std)
			}
			f.Encode(v, dst[f.Bytes(done):])
		}
		return
	}
	p := r.pool(rl)
	rb, bb := rl.RowBytes(), f.BlockBytes
	whole := rl.Len / f.BlockElems
	for row := 0; row < rows; row++ {
		out := dst[row*rb : (row+1)*rb]
		for b := 0; b < whole; b++ {
			copy(out[b*bb:], p.full[rng.IntN(poolBlocks)])
		}
		if rl.Padded() {
			copy(out[whole*bb:], p.tail[rng.IntN(poolBlocks)])
		}
	}
}

// NgramTable serves the n-gram table of a PLE role as noise generated row by
// row (each row from its own seed), so a table of any size costs no memory
// and any row can be gathered at once.
func (r *Random) NgramTable(spec models.TensorSpec) (*NgramTable, error) {
	if len(spec.Shape) != 2 || spec.Shape[0] <= 0 || spec.Shape[1] <= 0 {
		return nil, fmt.Errorf("role %s of shape %v is not an n-gram table", spec.Name, spec.Shape)
	}
	h := fnv.New64a()
	fmt.Fprint(h, spec.Name)
	stream := h.Sum64()
	width := spec.Shape[1]
	return &NgramTable{role: spec.Name, width: width, rows: spec.Shape[0],
		layout: quant.RowLayout{Format: mustFormat("f32"), Len: width, Stored: width},
		fill: func(first int, to quant.RowLayout, dst []byte) {
			rb := to.RowBytes()
			for i := 0; i < len(dst)/rb; i++ {
				rng := rand.New(rand.NewPCG(r.Seed^stream, uint64(first+i)))
				r.fill(to, 1, rng, dst[i*rb:(i+1)*rb])
			}
		}}, nil
}

// CheckNgram accepts any hash parameters: random weights have none stored.
func (r *Random) CheckNgram(int, []int64, []int64, []int64) error { return nil }

// pool returns (building once) the noise blocks of a row layout.
func (r *Random) pool(rl quant.RowLayout) *blockPool {
	key := quant.RowLayout{Format: rl.Format, Len: rl.Len % rl.Format.BlockElems, Stored: rl.Format.BlockElems}
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.pools[key]; ok {
		return p
	}
	rng := rand.New(rand.NewPCG(r.Seed, uint64(rl.Format.Code)<<32|uint64(key.Len)))
	f := rl.Format
	p := &blockPool{}
	v := make([]float32, f.BlockElems)
	for range poolBlocks {
		for i := range v {
			v[i] = float32(rng.NormFloat64() * r.Std)
		}
		b := make([]byte, f.BlockBytes)
		f.Encode(v, b)
		p.full = append(p.full, b)
		if key.Len > 0 {
			clear(v[key.Len:]) // the padding of a row's last block is zero
			t := make([]byte, f.BlockBytes)
			f.Encode(v, t)
			p.tail = append(p.tail, t)
		}
	}
	r.pools[key] = p
	return p
}
