package load

import (
	"fmt"

	"github.com/strata-llm/strata/artifact"
	"github.com/strata-llm/strata/runtime/backend"
	"github.com/strata-llm/strata/runtime/backend/cuda"
)

// BackendCUDA runs the generated MSL on an NVIDIA GPU through the CUDA
// prelude (runtime/backend/cuda): Linux with a CUDA driver and NVRTC.
const BackendCUDA = "cuda"

// cudaBackend is the CUDA backend running artifact a's kernels.metal.
// Where no GPU or driver is present it fails saying so.
func cudaBackend(a *artifact.Artifact, opt cuda.Options) (backend.Backend, error) {
	if err := cuda.Available(); err != nil {
		return nil, fmt.Errorf("backend %s needs an NVIDIA GPU with its driver (libcuda) and NVRTC: %w", BackendCUDA, err)
	}
	return cuda.New(a, opt)
}
