package cpu

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Backend is the pure-Go backend as the engine drives it: memory in Go's
// heap (backend.NewHostMemory), one Program per window graph.
var Backend backend.InPlace = hostBackend{}

type hostBackend struct{}

func (hostBackend) NewMemory(graphs ...*graph.Graph) (backend.Memory, error) {
	m, err := backend.NewHostMemory(graphs...)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return m, nil
}

// InPlaceWeights: the kernels read weights from any host memory, so a
// mapped file's tensors are used where they lie.
func (hostBackend) InPlaceWeights() bool { return true }

func (hostBackend) Compile(g *graph.Graph, mem backend.Memory) (backend.Program, error) {
	m, ok := mem.(*backend.HostMemory)
	if !ok {
		return nil, fmt.Errorf("cpu: memory of type %T, not the cpu backend's", mem)
	}
	p, err := Compile(g, m)
	if err != nil {
		return nil, err
	}
	return p, nil
}
