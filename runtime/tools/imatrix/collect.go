package imatrix

import (
	"fmt"
	"slices"
	"sync"
)

// Collector sums squared activations per weight (cpu.Observer): Σx² per
// input column and the number of rows, per matrix, in float64.
type Collector struct {
	mu    sync.Mutex
	stats map[string]*acc
}

type acc struct {
	cols   int
	sums   []float64 // nmat × cols
	counts []int64   // nmat
}

// NewCollector returns an empty collector.
func NewCollector() *Collector { return &Collector{stats: map[string]*acc{}} }

// Activations adds rows x (cols wide) entering matrix mat of tensor.
func (c *Collector) Activations(tensor string, mat, nmat, cols int, x []float32) {
	if cols <= 0 || len(x) < cols || mat < 0 || mat >= nmat {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a, ok := c.stats[tensor]
	if !ok {
		a = &acc{cols: cols, sums: make([]float64, nmat*cols), counts: make([]int64, nmat)}
		c.stats[tensor] = a
	}
	if a.cols != cols || len(a.counts) != nmat {
		return // a second use of the tensor with another shape: not a weight operand
	}
	s := a.sums[mat*cols : (mat+1)*cols]
	rows := len(x) / cols
	for r := 0; r < rows; r++ {
		for i, v := range x[r*cols : (r+1)*cols] {
			s[i] += float64(v) * float64(v)
		}
	}
	a.counts[mat] += int64(rows)
}

// Tensors lists the tensors seen so far.
func (c *Collector) Tensors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for n := range c.stats {
		out = append(out, n)
	}
	return out
}

// Target is where one collected tensor goes in the matrix: the GGUF tensor
// name, and the order of its columns there (nil: the same; else Perm[i] is
// the collected column that lands at column i).
type Target struct {
	Name string
	Perm []int
}

// Matrix turns the statistics into an importance matrix under GGUF names:
// names maps a collected tensor to its targets (several when the file
// splits it by rows; all then share the input columns), none to leave it
// out.
func (c *Collector) Matrix(names func(tensor string) []Target) (*Matrix, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := &Matrix{Entries: map[string]*Entry{}}
	for n, a := range c.stats {
		for _, t := range names(n) {
			if t.Perm != nil && len(t.Perm) != a.cols {
				return nil, fmt.Errorf("imatrix: %s → %s: a column order of %d for %d columns", n, t.Name, len(t.Perm), a.cols)
			}
			e := &Entry{Cols: a.cols, Sums: make([]float32, len(a.sums)), Counts: make([]float32, len(a.counts))}
			for mat, k := range a.counts {
				e.Counts[mat] = float32(k)
				for i := 0; i < a.cols; i++ {
					src := i
					if t.Perm != nil {
						src = t.Perm[i]
					}
					e.Sums[mat*a.cols+i] = float32(a.sums[mat*a.cols+src])
				}
			}
			if prev, dup := m.Entries[t.Name]; dup {
				// Rows of one GGUF tensor run as several matmuls of the same
				// input (qwen3next's ssm_ba as the GDN's b and a): the same
				// statistics, kept once.
				if !slices.Equal(prev.Sums, e.Sums) || !slices.Equal(prev.Counts, e.Counts) {
					return nil, fmt.Errorf("imatrix: two tensors with different statistics map to %s", t.Name)
				}
				continue
			}
			m.Entries[t.Name] = e
		}
	}
	return m, nil
}
