package cuda_test

import (
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend/cuda"
	"github.com/strata-llm/strata/runtime/backend/mslemu"
)

// TestClangChecksMatrix: without a GPU, clang's CUDA mode type-checks the
// prelude's rendering of e2e.MatrixSource (and NVRTC compiles it for sm_90
// where libnvrtc is), which TestCUDASimdgroupMatrix runs on the GPU.
func TestClangChecksMatrix(t *testing.T) {
	clang, err := mslemu.Clang()
	if err != nil {
		t.Skip(err)
	}
	if _, err := cuda.ClangCheck(e2e.MatrixArtifact(), clang); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cuda.NVRTCVersion(); err == nil {
		if _, err := cuda.CompileAll(e2e.MatrixArtifact(), 9, 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCUDASimdgroupMatrix: the prelude's simdgroup_float8x8 on the FP64
// tensor cores (mma.sync m8n8k4) gives e2e.MatrixSource's products exactly:
// the lane layout of loads and stores, the column permutation between the
// tensor core's fragments and ours, accumulation in place, and a product
// used again as A, as C and (through the shuffles) as B. The prefill
// matmuls of the oracle suite run on the same functions.
func TestCUDASimdgroupMatrix(t *testing.T) {
	requireCUDA(t)
	b, err := cuda.New(e2e.MatrixArtifact(), cuda.Options{PipelineCache: "off"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e2e.RunMatrix(t, b)
}
