package cpu

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Host is the pure-Go backend as the engine drives it: memory in Go's heap
// (backend.NewHostMemory), one Program per window graph, each kernel
// splitting its work over the backend's own pool of threads.
type Host struct{ pool *pool }

// New is a cpu backend whose kernels split their work into threads
// chunks: n ≥ 1, or 0 for one per core (GOMAXPROCS). It is what the
// config's runtime.threads and strata's --threads set (runtime/load).
func New(threads int) *Host { return &Host{pool: newPool(threads)} }

// Backend is the cpu backend with a thread per core, for callers that
// need no other count.
var Backend = New(0)

var (
	_ backend.InPlace = (*Host)(nil)
	_ backend.Forker  = (*Host)(nil)
)

// Threads is how many chunks the kernels split their work into.
func (h *Host) Threads() int { return h.pool.threads }

func (*Host) NewMemory(graphs ...*graph.Graph) (backend.Memory, error) {
	m, err := backend.NewHostMemory(graphs...)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return m, nil
}

// InPlaceWeights: the kernels read weights from any host memory, so a
// mapped file's tensors are used where they lie.
func (*Host) InPlaceWeights() bool { return true }

func (h *Host) Compile(g *graph.Graph, mem backend.Memory) (backend.Program, error) {
	m, ok := mem.(*backend.HostMemory)
	if !ok {
		return nil, fmt.Errorf("cpu: memory of type %T, not the cpu backend's", mem)
	}
	p, err := h.CompileHost(g, m)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Fork is a memory sharing base's buffers but those of kinds, which are
// fresh in Go's heap: another sequence's state over the same weights.
func (*Host) Fork(base backend.Memory, kinds ...string) (backend.Memory, error) {
	m, ok := base.(*backend.HostMemory)
	if !ok {
		return nil, fmt.Errorf("cpu: memory of type %T, not the cpu backend's", base)
	}
	f, err := m.Fork(kinds, func(b graph.Buffer) ([]byte, error) {
		return backend.AlignedBytes(b.Size, backend.Align(b.Kind)), nil
	})
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return f, nil
}
