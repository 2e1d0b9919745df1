package strata

import (
	"fmt"

	"github.com/strata-llm/strata/graph"
	"github.com/strata-llm/strata/models"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/cuda"
)

// BackendCUDA runs the generated MSL on an NVIDIA GPU through the CUDA
// prelude (runtime/cuda): Linux with a CUDA driver and NVRTC.
const BackendCUDA = "cuda"

// cudaBackend is the CUDA backend for the graphs of model c, whose
// kernels.metal is generated in memory as for mslemu. Where no GPU or
// driver is present it fails saying so.
func cudaBackend(c *models.Config, graphs []*graph.Graph, opt cuda.Options) (backend.Backend, error) {
	if err := cuda.Available(); err != nil {
		return nil, fmt.Errorf("backend %s needs an NVIDIA GPU with its driver (libcuda) and NVRTC: %w", BackendCUDA, err)
	}
	m, err := ArtifactOf(c, graphs)
	if err != nil {
		return nil, err
	}
	return cuda.New(m, opt)
}
