package engine

import (
	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/buffers"
	"github.com/strata-llm/strata/runtime/cpu"
)

// Memory backs a model's buffers on some device; the host reads and writes
// them through byte slices (shared memory on Apple silicon).
type Memory interface {
	Bytes(r graph.Range) ([]byte, error)
	Buffer(name string) []byte
	Clear(kind string)
	Snapshot(kind string, dst map[string][]byte) map[string][]byte
	Restore(snap map[string][]byte)
}

// Program is one window graph bound to memory.
type Program interface {
	Run() error
}

// HostProgram is a Program that can stop at the graph's host points and
// call the host there (after the layer's router, before its routed experts
// run): what expert streaming needs from a backend.
type HostProgram interface {
	Program
	RunHost(host func(graph.HostPoint) error) error
}

// Backend executes window graphs: the pure-Go cpu backend, or the GPU. A
// backend that is an io.Closer is closed with the model it loaded.
type Backend interface {
	NewMemory(graphs ...*graph.Graph) (Memory, error)
	Compile(g *graph.Graph, mem Memory) (Program, error)
}

// CPU is the pure-Go backend.
var CPU Backend = cpuBackend{}

type cpuBackend struct{}

func (cpuBackend) NewMemory(graphs ...*graph.Graph) (Memory, error) {
	m, err := buffers.NewMemory(graphs...)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return m, nil
}

// InPlaceWeights: the cpu kernels read weights from any host memory.
func (cpuBackend) InPlaceWeights() bool { return true }

func (cpuBackend) Compile(g *graph.Graph, mem Memory) (Program, error) {
	p, err := cpu.Compile(g, mem.(*buffers.Memory))
	if err != nil {
		return nil, err
	}
	return cpuProgram{p}, nil
}

// cpuProgram adapts cpu.Program (whose Run cannot fail).
type cpuProgram struct{ *cpu.Program }

var _ HostProgram = cpuProgram{}

func (p cpuProgram) Run() error {
	p.Program.Run()
	return nil
}

// window is a compiled window graph.
type window struct {
	g *graph.Graph
	p Program
}
