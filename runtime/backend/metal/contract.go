package metal

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/backend"
)

// Engine is the backend under the contract runtime/engine drives
// (runtime/backend): memory the host reads and writes in place, one program
// per window graph, host points served by the engine's expert streaming
// (Program.RunHost), weights wrapped in place. Closing it closes the backend.
func (b *Backend) Engine() backend.Backend { return engineBackend{b} }

type engineBackend struct{ b *Backend }

var (
	_ backend.InPlace      = engineBackend{}
	_ backend.MappedMemory = (*Memory)(nil)
	_ backend.HostProgram  = (*Program)(nil)
)

func (e engineBackend) NewMemory(graphs ...*graph.Graph) (backend.Memory, error) {
	m, err := e.b.NewMemory(graphs...)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return m, nil
}

func (e engineBackend) Compile(g *graph.Graph, mem backend.Memory) (backend.Program, error) {
	m, ok := mem.(*Memory)
	if !ok {
		return nil, fmt.Errorf("metal: memory of type %T, not from this backend", mem)
	}
	p, err := e.b.Compile(g, m)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// InPlaceWeights: a mapped file's pages are wrapped as shared MTLBuffers
// (newBufferWithBytesNoCopy) when they sit on device pages.
func (e engineBackend) InPlaceWeights() bool { return true }

// Stats is the telemetry of every window the backend ran.
func (e engineBackend) Stats() Stats { return e.b.Stats() }

// Close releases the device's objects.
func (e engineBackend) Close() error {
	e.b.Close()
	return nil
}
