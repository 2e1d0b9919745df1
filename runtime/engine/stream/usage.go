package stream

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"sort"

	"github.com/strata-llm/strata/internal/outfile"
)

// Usage is a decayed per-(layer, expert) use count: what a restart's arena
// fill learns from. Counts decay by half every HalfLife windows.
type Usage struct {
	Layers, Experts int
	Counts          []float64
	Windows         float64 // windows seen (decayed the same way), how much the history covers
	Order           []int   // LRU order at save time, most recent first
	decay           float64
}

// HalfLife is how many windows halve a count.
const HalfLife = 4096

// NewUsage returns an empty history.
func NewUsage(layers, experts int) *Usage {
	return &Usage{Layers: layers, Experts: experts, Counts: make([]float64, layers*experts), decay: math.Exp2(-1.0 / HalfLife)}
}

func (u *Usage) hit(key int) { u.Counts[key]++ }

func (u *Usage) tick() {
	u.Windows = u.Windows*u.decay + 1
	if u.decay == 0 {
		u.decay = math.Exp2(-1.0 / HalfLife)
	}
	for i := range u.Counts {
		u.Counts[i] *= u.decay
	}
}

const usageMagic = "STRATAUSAGE\x00"
const usageVersion = 1

// Save writes the history next to the pack, atomically (temp file, rename).
func (u *Usage) Save(path string, order []int) error {
	var b bytes.Buffer
	b.WriteString(usageMagic)
	for _, v := range []any{uint32(usageVersion), uint32(u.Layers), u.Experts32(), u.Windows, uint32(len(order))} {
		binary.Write(&b, binary.LittleEndian, v)
	}
	binary.Write(&b, binary.LittleEndian, u.Counts)
	for _, k := range order {
		binary.Write(&b, binary.LittleEndian, uint32(k))
	}
	if err := outfile.WriteFile(path, b.Bytes()); err != nil {
		return fmt.Errorf("saving the usage history: %w", err)
	}
	return nil
}

// Experts32 is the expert count as stored.
func (u *Usage) Experts32() uint32 { return uint32(u.Experts) }

// LoadUsage reads a history saved for a model of layers × experts. A file
// of another version or shape, or a damaged one, is an error the caller
// reports as a warning and ignores.
func LoadUsage(path string, layers, experts int) (*Usage, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := bytes.NewReader(data)
	magic := make([]byte, len(usageMagic))
	if _, err := r.Read(magic); err != nil || string(magic) != usageMagic {
		return nil, fmt.Errorf("usage history %s: not a strata usage history", path)
	}
	var version, l, e, n uint32
	var windows float64
	for _, p := range []any{&version, &l, &e, &windows, &n} {
		if err := binary.Read(r, binary.LittleEndian, p); err != nil {
			return nil, fmt.Errorf("usage history %s: truncated header", path)
		}
	}
	if version != usageVersion {
		return nil, fmt.Errorf("usage history %s: version %d, this strata reads %d", path, version, usageVersion)
	}
	if int(l) != layers || int(e) != experts {
		return nil, fmt.Errorf("usage history %s: for %d layers × %d experts, the model has %d × %d", path, l, e, layers, experts)
	}
	// Every count is checked against the model before anything is
	// allocated: a damaged file costs no more memory than a good one.
	keys := layers * experts
	if int64(n) > int64(keys) {
		return nil, fmt.Errorf("usage history %s: an LRU order of %d entries, the model has %d experts", path, n, keys)
	}
	if want := int64(8*keys) + 4*int64(n); int64(r.Len()) != want {
		return nil, fmt.Errorf("usage history %s: %d bytes after the header, %d × %d counts and %d LRU entries take %d", path, r.Len(), layers, experts, n, want)
	}
	u := NewUsage(layers, experts)
	u.Windows = windows
	if err := binary.Read(r, binary.LittleEndian, u.Counts); err != nil {
		return nil, fmt.Errorf("usage history %s: truncated counts", path)
	}
	order := make([]uint32, n)
	if err := binary.Read(r, binary.LittleEndian, order); err != nil {
		return nil, fmt.Errorf("usage history %s: damaged LRU order: %w", path, err)
	}
	for _, k := range order {
		if int(k) >= layers*experts {
			return nil, fmt.Errorf("usage history %s: LRU entry %d out of range", path, k)
		}
		u.Order = append(u.Order, int(k))
	}
	for _, c := range u.Counts {
		if c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
			return nil, fmt.Errorf("usage history %s: damaged counts", path)
		}
	}
	return u, nil
}

// FillOrder ranks experts for the arena's startup fill: by a blend of the
// history's counts (weight alpha once it covers enough windows) and a static
// profile score (higher: more used); ties by key. profile may be nil.
func FillOrder(u *Usage, profile []float64, alpha float64, minWindows float64) []int {
	n := u.Layers * u.Experts
	score := make([]float64, n)
	w := 0.0
	if u.Windows >= minWindows {
		w = alpha
	}
	norm := func(v []float64) []float64 {
		mx := 0.0
		for _, x := range v {
			mx = math.Max(mx, x)
		}
		out := make([]float64, len(v))
		for i, x := range v {
			if mx > 0 {
				out[i] = x / mx
			}
		}
		return out
	}
	h := norm(u.Counts)
	var p []float64
	if profile != nil {
		p = norm(profile)
	}
	for k := 0; k < n; k++ {
		if p != nil {
			score[k] = (1 - w) * p[k]
		}
		score[k] += w * h[k]
	}
	keys := make([]int, n)
	for i := range keys {
		keys[i] = i
	}
	sort.SliceStable(keys, func(a, b int) bool { return score[keys[a]] > score[keys[b]] })
	return keys
}
