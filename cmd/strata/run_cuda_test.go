package main

import (
	"strings"
	"testing"

	"github.com/strata-llm/strata/runtime/backend/cuda"
)

// TestRunCUDARefusedWithoutGPU: where no CUDA driver loads (CI), --backend
// cuda fails with one clear error line (after the arena's note) saying what it needs; --icb is accepted
// with it (CUDA-graph replay) and --keepalive is not.
func TestRunCUDARefusedWithoutGPU(t *testing.T) {
	if cuda.Available() == nil {
		t.Skip("a GPU is here: the backend runs (TestCUDABackendOracles)")
	}
	for _, extra := range [][]string{nil, {"--icb"}} {
		args := append([]string{"run", "--backend", "cuda", "--hf", "../../testdata/oracles/tiny-a", "--tokens", "1,2,3", "-n", "2"}, extra...)
		_, stderr, status := runStrata(t, args...)
		if status != 1 || !strings.Contains(stderr, "backend cuda needs an NVIDIA GPU with its driver (libcuda) and NVRTC") || strings.Count(stderr, "strata run:") != 1 {
			t.Errorf("%v: status %d, stderr %q", extra, status, stderr)
		}
	}
	_, stderr, status := runStrata(t, "run", "--backend", "cuda", "--keepalive", "5ms", "--hf", "../../testdata/oracles/tiny-a", "--tokens", "1")
	if status != 2 || !strings.Contains(stderr, "--keepalive") {
		t.Errorf("--keepalive with cuda: status %d, stderr %q", status, stderr)
	}
}
