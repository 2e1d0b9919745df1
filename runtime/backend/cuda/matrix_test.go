package cuda_test

import (
	"testing"

	"github.com/strata-llm/strata/internal/e2e"
	"github.com/strata-llm/strata/runtime/backend/cuda"
)

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
