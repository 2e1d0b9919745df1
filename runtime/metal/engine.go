package metal

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/runtime/engine"
)

// Engine is the backend as runtime/engine drives it: memory the host reads
// and writes in place, one program per window graph, host points served by
// the engine's expert streaming (Program.RunHost). Closing it closes the
// backend.
func (b *Backend) Engine() engine.Backend { return engineBackend{b} }

type engineBackend struct{ b *Backend }

var (
	_ engine.InPlaceBackend = engineBackend{}
	_ engine.Memory         = (*Memory)(nil)
	_ engine.HostProgram    = (*Program)(nil)
)

func (e engineBackend) NewMemory(graphs ...*graph.Graph) (engine.Memory, error) {
	m, err := e.b.NewMemory(graphs...)
	if err != nil {
		return nil, err // not a typed nil inside the interface
	}
	return m, nil
}

func (e engineBackend) Compile(g *graph.Graph, mem engine.Memory) (engine.Program, error) {
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
